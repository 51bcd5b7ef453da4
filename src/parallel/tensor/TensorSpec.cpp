// --strategy tensor (--tensor-parallel T) as the run configuration sees it:
// world = dp x tp; the dp dimension averages gradients with the allreduce
// strategy on the ranks holding the same slices. Built into the api layer;
// registered by one line in api/StrategyList.inc.
#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "parallel/tensor/TensorParallelStrategy.h"

namespace dtrain::api {

using runtime::TrainConfig;

namespace {

std::unique_ptr<parallel::Strategy> makeTensor(const TrainConfig& c, comm::Communicator& comm,
                                               const SharedRun&) {
  parallel::tensor::TensorParallelOptions o;
  o.size = c.tensorParallel;
  o.dataParallelBelowCut = c.tensorParallelStyle == "krizhevsky";
  setMeshOptions(o, c);
  return std::make_unique<parallel::tensor::TensorParallel>(comm, std::move(o));
}

}  // namespace

StrategyEntry tensorStrategy() {
  StrategyEntry e;
  e.name = "tensor";
  e.summary = "tensor (the default with --tensor-parallel T)";
  e.groups = trainerGroups({"allreduce", "compress"});
  e.ignores = meshIgnores();
  e.ignores["parallel.pipeline_stages"] =
      "runs the pipeline strategy (data parallel across pipelines, cut further with "
      "--tensor-parallel); drop --strategy tensor";
  e.make = makeTensor;
  e.validate = [](const RunConfig& rc) {
    DTRAIN_CHECK_USAGE(rc.train.tensorParallel > 1, "--strategy tensor needs --tensor-parallel T > 1");
  };
  return e;
}

}  // namespace dtrain::api
