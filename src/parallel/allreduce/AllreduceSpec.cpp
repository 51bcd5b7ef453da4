// --strategy allreduce (and single, its one-worker case) as the run
// configuration sees them: the data parallelism every mesh's dp dimension also
// runs, its options' translation and its factories (built into the api layer;
// registered by lines in api/StrategyList.inc).
#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "nn/ModelRegistry.h"
#include "parallel/allreduce/DataParallel.h"
#include "parallel/zero/ZeroDataParallel.h"
#include "runtime/Trainer.h"

namespace dtrain::api {

using runtime::TrainConfig;

parallel::DataParallelOptions dataParallelOptions(const TrainConfig& c, comm::Communicator& comm) {
  parallel::DataParallelOptions o;
  o.fusionMb = c.fusionMb;
  o.overlap = c.overlap;
  o.syncBn = c.syncBn;
  o.algo = comm::algorithmFromName(c.allreduceAlgo);
  o.compress = runtime::compressOptions(c);
  o.sfb = parallel::sfbModeFromName(c.sfb);
  // The rows a Linear layer sees per step on a rank (--sfb auto's B): the
  // --accumulate micro-batches of --batch-size, x the context for language models.
  const nn::ModelInfo info = nn::modelInfo(c.model, runtime::modelOverrides(c));
  o.sfbRows = c.batchSize * c.accumulate * (info.task == nn::kLanguageModelTask ? info.blockSize : 1);
  DTRAIN_CHECK_USAGE(comm.supports(o.algo), "--allreduce-algo ", c.allreduceAlgo,
                     " is not available on the ", comm.backend(), " backend");
  return o;
}

// --zero 1|2|3 shards the optimizer state (and gradients, and parameters) of the same allreduce
// data parallelism (parallel/zero/). Also the dp dimension of a pipeline or a
// tensor-parallel mesh, on the communicator of a stage's (a slice's) replicas.
std::unique_ptr<parallel::Strategy> makeDataParallel(const TrainConfig& c, comm::Communicator& comm) {
  if (c.zero > 0) {
    parallel::zero::ZeroOptions z;
    z.stage = c.zero;
    z.fusionMb = c.fusionMb;
    z.gatherEvery = c.evalEvery;
    z.offloadParams = c.offload == "params";
    if (c.compress == "fp16") z.gradientWire = DType::F16;
    if (c.compress == "bf16") z.gradientWire = DType::BF16;
    z.optimizer = c.optimizer;
    z.optimizerOptions = runtime::optimizerOptions(c);
    return std::make_unique<parallel::zero::ZeroDataParallel>(comm, std::move(z));
  }
  return std::make_unique<parallel::DataParallel>(comm, dataParallelOptions(c, comm));
}

StrategyEntry allreduceStrategy() {
  StrategyEntry e;
  e.name = "allreduce";
  e.summary = "allreduce (data parallelism; the default with more than one worker)";
  e.groups = trainerGroups({"allreduce", "compress"});
  e.ignores = noMesh("allreduce", {});
  e.make = [](const TrainConfig& c, comm::Communicator& comm, const SharedRun&) {
    return makeDataParallel(c, comm);
  };
  return e;
}

StrategyEntry singleStrategy() {
  const std::string oneWorker = "applies to data parallelism (this run has one worker: add --workers N)";
  StrategyEntry e;
  e.name = "single";
  e.summary = "single (one worker, no communication)";
  e.groups = trainerGroups({"allreduce", "compress"});
  e.ignores = noMesh("single", {{"memory.zero", oneWorker}, {"allreduce", oneWorker}, {"compress", oneWorker}});
  e.worldSize = [](const TrainConfig&) { return 1; };
  e.make = [](const TrainConfig&, comm::Communicator&, const SharedRun&) {
    return std::make_unique<parallel::SingleProcess>();
  };
  e.validate = [](const RunConfig& rc) {
    const TrainConfig& c = rc.train;
    DTRAIN_CHECK_USAGE(c.workers == 1 && c.backend != "mpi",
                       "--strategy single runs one process with one worker; use --strategy "
                       "allreduce with --workers ", c.workers, " or --backend mpi");
  };
  e.oneProcess = true;
  return e;
}

}  // namespace dtrain::api
