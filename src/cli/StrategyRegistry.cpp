#include "cli/StrategyRegistry.h"

#include <map>

#include "cli/RankRunner.h"
#include "core/Error.h"
#include "core/NameRegistry.h"
#include "core/Memory.h"
#include "nn/Lora.h"
#include "nn/ModelRegistry.h"
#include "parallel/allreduce/DataParallel.h"
#include "parallel/pipeline/PipelineParallel.h"
#include "parallel/ps/Server.h"
#include "parallel/ps/Worker.h"
#include "parallel/tensor/TensorParallel.h"
#include "parallel/zero/ZeroDataParallel.h"
#include "runtime/LoraSetup.h"

namespace dtrain::cli {

namespace {

using runtime::TrainConfig;

parallel::DataParallelOptions dataParallelOptions(const TrainConfig& c, comm::Communicator& comm) {
  parallel::DataParallelOptions o;
  o.fusionMb = c.fusionMb;
  o.overlap = c.overlap;
  o.algo = comm::algorithmFromName(c.allreduceAlgo);
  o.compress = runtime::compressOptions(c);
  DTRAIN_CHECK_USAGE(comm.supports(o.algo), "--allreduce-algo ", c.allreduceAlgo,
                     " is not available on the ", comm.backend(), " backend");
  return o;
}

int workers(const TrainConfig& c) { return c.workers; }

std::unique_ptr<parallel::Strategy> makeSingle(const TrainConfig&, comm::Communicator&,
                                               const SharedRun&) {
  return std::make_unique<parallel::SingleProcess>();
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

std::unique_ptr<parallel::Strategy> makeAllreduce(const TrainConfig& c, comm::Communicator& comm,
                                                  const SharedRun&) {
  return makeDataParallel(c, comm);
}

// Ranks 0..servers-1 serve (the model only gives them the parameter names and
// shapes), the others train.
std::unique_ptr<parallel::Strategy> makePs(const TrainConfig& c, comm::Communicator& comm,
                                           const SharedRun&) {
  auto opts = runtime::psOptions(c, comm.rank());
  if (comm.rank() < c.servers) {
    auto model = nn::buildModel(c.model, runtime::modelOverrides(c), c.seed);
    // LoRA: the servers hold the adapters, the only trained parameters.
    if (c.loraRank) nn::applyLora(*model, c.model, runtime::loraOptions(c, *model), c.seed);
    // memory_per_rank: the server's own figures (its shard), not the model it
    // reads the names and shapes from.
    memory::DomainScope accounted(memory::newDomain());
    parallel::ps::ParameterServer server(comm, *model, opts);
    server.run();
    return nullptr;
  }
  return std::make_unique<parallel::ps::PsWorker>(comm, opts);
}

std::unique_ptr<parallel::Strategy> makeHogwild(const TrainConfig& c, comm::Communicator& comm,
                                                const SharedRun& shared) {
  DTRAIN_CHECK(shared.hogwild, "--strategy hogwild: no shared parameter set");
  return std::make_unique<parallel::Hogwild>(comm, shared.hogwild);
}

// --pipeline-stages P (and --tensor-parallel T): world = dp x pp x tp; the dp
// dimension averages gradients with the allreduce strategy (or shards them
// with --zero 1|2) on its own sub-communicator.
std::unique_ptr<parallel::Strategy> makePipeline(const TrainConfig& c, comm::Communicator& comm,
                                                 const SharedRun&) {
  parallel::pipeline::PipelineOptions o;
  o.stages = c.pipelineStages;
  o.tensorParallel = c.tensorParallel;
  o.microBatches = static_cast<int>(c.microBatches);
  o.schedule = parallel::pipeline::scheduleFromName(c.pipelineSchedule);
  o.virtualStages = c.virtualStages;
  o.split = c.pipelineSplit;
  o.spread = c.placement == "spread";
  o.gatherEvery = c.evalEvery;
  o.gatherOptimizer = !c.save.empty();
  o.makeDataParallel = [&c](comm::Communicator& dp) { return makeDataParallel(c, dp); };
  return std::make_unique<parallel::pipeline::PipelineParallel>(comm, std::move(o));
}

// --tensor-parallel T: world = dp x tp; the dp dimension averages gradients
// with the allreduce strategy on the ranks holding the same slices.
std::unique_ptr<parallel::Strategy> makeTensor(const TrainConfig& c, comm::Communicator& comm,
                                               const SharedRun&) {
  parallel::tensor::TensorParallelOptions o;
  o.size = c.tensorParallel;
  o.dataParallelBelowCut = c.tensorParallelStyle == "krizhevsky";
  o.spread = c.placement == "spread";
  o.gatherEvery = c.evalEvery;
  o.gatherOptimizer = !c.save.empty();
  o.makeDataParallel = [&c](comm::Communicator& dp) { return makeDataParallel(c, dp); };
  return std::make_unique<parallel::tensor::TensorParallel>(comm, std::move(o));
}

const NameRegistry<StrategyEntry>& registry() {
  static const NameRegistry<StrategyEntry> r(
      "strategy", {
                      {"single", {[](const TrainConfig&) { return 1; }, makeSingle}},
                      {"allreduce", {workers, makeAllreduce}},
                      {"ps", {[](const TrainConfig& c) { return c.servers + c.workers; }, makePs}},
                      {"hogwild", {workers, makeHogwild}},
                      {"pipeline", {workers, makePipeline}},
                      {"tensor", {workers, makeTensor}},
                  });
  return r;
}

}  // namespace

const StrategyEntry& strategyEntry(const std::string& name) { return registry().find(name); }

}  // namespace dtrain::cli
