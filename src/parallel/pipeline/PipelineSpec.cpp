// --strategy pipeline (--pipeline-stages P, with --tensor-parallel T inside its
// stages) as the run configuration sees it: world = dp x pp x tp; the dp
// dimension averages gradients with the allreduce strategy (or shards them
// with --zero 1|2) on its own sub-communicator. Built into the api layer;
// registered by one line in api/StrategyList.inc.
#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "parallel/pipeline/PipelineParallel.h"

namespace dtrain::api {

using runtime::TrainConfig;

namespace {

std::unique_ptr<parallel::Strategy> makePipeline(const TrainConfig& c, comm::Communicator& comm,
                                                 const SharedRun&) {
  parallel::pipeline::PipelineOptions o;
  o.stages = c.pipelineStages;
  o.tensorParallel = c.tensorParallel;
  o.microBatches = static_cast<int>(c.microBatches);
  o.schedule = parallel::pipeline::scheduleFromName(c.pipelineSchedule);
  o.virtualStages = c.virtualStages;
  o.split = c.pipelineSplit;
  setMeshOptions(o, c);
  return std::make_unique<parallel::pipeline::PipelineParallel>(comm, std::move(o));
}

}  // namespace

StrategyEntry pipelineStrategy() {
  StrategyEntry e;
  e.name = "pipeline";
  e.summary = "pipeline (the default with --pipeline-stages P)";
  e.groups = trainerGroups({"allreduce", "compress"});
  e.ignores = meshIgnores();
  e.ignores["training.accumulate"] =
      "does not combine with --pipeline-stages (the pipeline's --micro-batches accumulate gradients)";
  e.make = makePipeline;
  e.validate = [](const RunConfig& rc) {
    DTRAIN_CHECK_USAGE(rc.train.pipelineStages > 1, "--strategy pipeline needs --pipeline-stages P > 1");
  };
  return e;
}

}  // namespace dtrain::api
