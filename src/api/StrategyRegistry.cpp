#include "api/StrategyRegistry.h"

#include <map>

#include "api/RankRunner.h"
#include "core/Error.h"
#include "core/Memory.h"
#include "nn/Lora.h"
#include "nn/ModelRegistry.h"
#include "optim/Factory.h"
#include "parallel/allreduce/DataParallel.h"
#include "parallel/compress/Compressor.h"
#include "parallel/pipeline/PipelineParallel.h"
#include "parallel/ps/Server.h"
#include "parallel/sandblaster/LbfgsShard.h"
#include "parallel/sandblaster/Sandblaster.h"
#include "parallel/ps/Worker.h"
#include "parallel/tensor/TensorParallelStrategy.h"
#include "parallel/zero/ZeroDataParallel.h"
#include "runtime/LoraSetup.h"
#include "runtime/Task.h"

namespace dtrain::api {

// The strategies whose spec lives in their folder (api/StrategyList.inc).
#define DTRAIN_STRATEGY(spec) StrategyEntry spec();
#include "api/StrategyList.inc"
#undef DTRAIN_STRATEGY

std::vector<std::string> trainerGroups(std::vector<std::string> more) {
  std::vector<std::string> g{"model", "data",  "training", "optimizer", "memory", "lora",
                             "checkpoint", "eval", "logging", "faults", "parallel"};
  g.insert(g.end(), more.begin(), more.end());
  return g;
}

std::map<std::string, std::string> noMesh(const std::string& name, std::map<std::string, std::string> ignores) {
  ignores["parallel.pipeline_stages"] =
      "runs its own strategy (data parallel across pipelines); drop --strategy " + name;
  ignores["parallel.tensor_parallel"] =
      "runs its own strategy (data parallel across tensor-parallel groups); drop --strategy " + name;
  return ignores;
}

using runtime::TrainConfig;

const char* const kZeroNotHere = "applies to the allreduce strategy and the data-parallel replicas of meshes";
const char* const kOffloadNotHere = "applies to one worker and to the allreduce strategy";
const char* const kNoPeriodicCheckpoints =
    "needs the single, allreduce, pipeline or tensor strategy (this strategy's state is not on "
    "one rank between steps)";

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

namespace {

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
                                           const SharedRun& shared) {
  auto opts = runtime::psOptions(c, comm.rank());
  if (comm.rank() < c.servers) {
    // The workers' model: built for the same data shape (e.g. a user's .npy features).
    auto model = nn::buildModel(c.model, runtime::modelOverrides(c), c.seed,
                                runtime::dataShape(c, shared.data));
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

// A Sandblaster worker's batches (--sandblaster-data workers): the batch of a
// global step, read once for all the units it computes from it (a step's
// evaluations share its batch); positioned by step, so a worker that gets no
// unit of some steps skips them.
class OwnBatches {
 public:
  explicit OwnBatches(runtime::Task& task) : task_(task) {}
  ~OwnBatches() {
    if (epoch_ >= 0) task_.endEpoch();
  }
  const data::Batch& operator()(int64_t epoch, int64_t step) {
    if (epoch == epoch_ && step == step_) return batch_;
    if (epoch != epoch_ || step != step_ + 1) {
      if (epoch_ >= 0) task_.endEpoch();
      task_.beginEpoch(epoch, step);
    }
    epoch_ = epoch;
    step_ = step;
    DTRAIN_CHECK(task_.nextBatch(batch_), "sandblaster: a worker's data has no batch for step ",
                 step + 1, " (epoch ", epoch + 1, ")");
    return batch_;
  }

 private:
  runtime::Task& task_;
  int64_t epoch_ = -1, step_ = -1;
  data::Batch batch_;
};

// --strategy sandblaster: rank 0 coordinates L-BFGS, ranks 1..servers hold the
// parameter shards (--sandblaster-servers), the rest compute the work units of
// each batch gradient (parallel/sandblaster/).
std::unique_ptr<parallel::Strategy> makeSandblaster(const TrainConfig& c, comm::Communicator& comm,
                                                    const SharedRun& shared) {
  parallel::sandblaster::SandblasterOptions o;
  o.servers = static_cast<int>(c.sandblasterServers);
  o.workUnits = static_cast<int>(c.workUnits);
  o.backups = c.backupTasks;
  o.workersRead = c.sandblasterData == "workers";
  for (const auto& [rank, ms] : c.stragglerMs) o.stragglerMs[static_cast<int>(rank)] = ms;
  o.randomDelayMs = c.randomDelayMs;
  o.seed = c.seed;
  if (comm.rank() == 0) return std::make_unique<parallel::sandblaster::SandblasterCoordinator>(comm, o);
  // A shard needs the parameter count, a worker the same model (its
  // parameters come with each evaluation's first unit) and the task's loss.
  auto model = nn::buildModel(c.model, runtime::modelOverrides(c), c.seed,
                              runtime::dataShape(c, shared.data));
  memory::DomainScope accounted(memory::newDomain());
  if (comm.rank() <= o.servers) {
    int64_t params = 0;  // as the coordinator counts them: every named parameter
    for (auto& [name, v] : model->namedParameters()) params += v.numel();
    model.reset();
    parallel::sandblaster::runSandblasterShard(comm, o.servers, params);
    return nullptr;
  }
  // The coordinator's task as its trainer makes it (replica 0 of 1), so that
  // the batch of a step is the same here.
  auto task = runtime::makeTask({c, nn::modelInfo(c.model, runtime::modelOverrides(c)), 0, 1, false},
                                shared.data);
  OwnBatches batches(*task);
  parallel::sandblaster::runSandblasterWorker(
      comm, *model,
      [&task](const autograd::Variable& out, const Tensor& y) { return task->lossFromOutput(out, y); },
      o, o.workersRead ? parallel::sandblaster::BatchReader(std::ref(batches)) : nullptr);
  return nullptr;
}

// Parameter servers: what sharded servers cannot do. (Which consistency mode
// reads which [ps] option is the options' own condition, api/groups/PsGroups.cpp.)
void validatePs(const RunConfig& rc) {
  const TrainConfig& c = rc.train;
  DTRAIN_CHECK_USAGE(!optim::needsWholeLayerNorms(c.optimizer), "--optimizer ", c.optimizer,
                     " needs whole-layer norms, which "
                     "sharded servers do not have; use sgd, adam, adamw or adagrad with --strategy ps");
  // The pushes are compressed with the compressors that have a point-to-point
  // form (parallel/ps/PushCodec.h).
  if (c.compress != "none") parallel::compress::requireMessageCodec(c.compress);
}

const std::map<std::string, StrategyEntry>& registry() {
  static const std::map<std::string, StrategyEntry> r = [] {
    std::map<std::string, StrategyEntry> r;
    auto add = [&r](StrategyEntry e) { r[e.name] = std::move(e); };
    auto entry = [&r](const std::string& name) -> StrategyEntry& { return r.at(name); };
    const std::string oneWorker = "applies to data parallelism (this run has one worker: add --workers N)";
    add({"single", trainerGroups({"allreduce", "compress"}),
         noMesh("single", {{"memory.zero", oneWorker}, {"allreduce", oneWorker}, {"compress", oneWorker}}),
         [](const TrainConfig&) { return 1; }, makeSingle, [](const RunConfig& rc) {
           const TrainConfig& c = rc.train;
           DTRAIN_CHECK_USAGE(c.workers == 1 && c.backend != "mpi",
                              "--strategy single runs one process with one worker; use --strategy "
                              "allreduce with --workers ", c.workers, " or --backend mpi");
         }});
    entry("single").oneProcess = true;
    add({"allreduce", trainerGroups({"allreduce", "compress"}), noMesh("allreduce", {}), workers,
         makeAllreduce, nullptr});
    add({"ps", trainerGroups({"ps", "compress"}),
         noMesh("ps", {{"compress.collective", "applies to allreduce (ps pushes go to one server)"},
                       {"memory.zero", kZeroNotHere},
                       {"memory.offload", kOffloadNotHere},
                       {"checkpoint.every", kNoPeriodicCheckpoints},
                       {"training.accumulate", "applies to --strategy allreduce (parameter servers accumulate with --push-every)"}}),
         [](const TrainConfig& c) { return c.servers + c.workers; }, makePs, validatePs});
    add({"sandblaster", trainerGroups({"sandblaster"}),
         noMesh("sandblaster", {{"memory.zero", kZeroNotHere},
                                {"ps.servers", "does not apply to --strategy sandblaster (its parameter "
                                 "shards: --sandblaster-servers)"},
                                {"memory.offload", kOffloadNotHere},
                                {"lora", "does not combine with --strategy sandblaster (its workers build the plain model)"},
                                {"training.accumulate", "does not apply to --strategy sandblaster (--work-units cuts each batch)"}}),
         [](const TrainConfig& c) { return static_cast<int>(c.workers + 1 + c.sandblasterServers); },
         makeSandblaster, [](const RunConfig& rc) {
           DTRAIN_CHECK_USAGE(rc.train.optimizer == "lbfgs", "--strategy sandblaster runs --optimizer lbfgs "
                              "(its workers compute batch gradients for the coordinator's line search)");
         }});
    entry("sandblaster").batchIsGlobal = true;
    std::map<std::string, std::string> meshIgnores{
        {"memory.offload", "cannot be combined with --pipeline-stages or --tensor-parallel yet"},
        {"allreduce.sfb", "cannot be combined with --pipeline-stages or --tensor-parallel (cut "
                          "layers and stage boundaries; plain allreduce data parallelism only)"}};
    auto pipelineIgnores = meshIgnores;
    pipelineIgnores["training.accumulate"] =
        "does not combine with --pipeline-stages (the pipeline's --micro-batches accumulate gradients)";
    add({"pipeline", trainerGroups({"allreduce", "compress"}), pipelineIgnores, workers, makePipeline,
         [](const RunConfig& rc) {
           DTRAIN_CHECK_USAGE(rc.train.pipelineStages > 1, "--strategy pipeline needs --pipeline-stages P > 1");
         }});
    meshIgnores["parallel.pipeline_stages"] =
        "runs the pipeline strategy (data parallel across pipelines, cut further with "
        "--tensor-parallel); drop --strategy tensor";
    add({"tensor", trainerGroups({"allreduce", "compress"}), meshIgnores, workers, makeTensor,
         [](const RunConfig& rc) {
           DTRAIN_CHECK_USAGE(rc.train.tensorParallel > 1, "--strategy tensor needs --tensor-parallel T > 1");
         }});
    // Federated learning runs its own rounds (federated/FederatedRunner.h): the
    // step loop's options mean nothing there; say which options do.
    add({"fedavg",
         {"model", "data", "training", "optimizer", "federated", "checkpoint", "eval", "logging", "parallel"},
         {{"training.batch_size", "does not apply to --strategy fedavg (use --local-batch)"},
          {"training.epochs", "does not apply to --strategy fedavg (use --local-epochs and --rounds)"},
          {"training.max_steps", "does not apply to --strategy fedavg (use --rounds)"},
          {"training.accumulate", "does not apply to --strategy fedavg (use --local-batch)"},
          {"data.augment", "does not apply to --strategy fedavg (clients read their own batches)"},
          {"optimizer.schedule", "does not apply to --strategy fedavg (clients train at a constant --lr)"},
          {"optimizer.warmup_steps", "does not apply to --strategy fedavg (clients train at a constant --lr)"},
          {"optimizer.scale_lr", "does not apply to --strategy fedavg (the server's step is --server-lr)"},
          {"checkpoint.every", "does not apply to --strategy fedavg (--save writes the global model at the end)"},
          {"checkpoint.dir", "does not apply to --strategy fedavg (--save writes the global model at the end)"},
          {"checkpoint.resume", "does not apply to --strategy fedavg (--load starts from a global model)"},
          {"eval.deferred", "does not apply to --strategy fedavg (it evaluates between rounds)"},
          {"parallel.pipeline_stages", "does not apply to --strategy fedavg"},
          {"parallel.tensor_parallel", "does not apply to --strategy fedavg"}},
         nullptr, nullptr, [](const RunConfig& rc) { rc.federated.validate(); }});
    for (const char* local : {"ps", "sandblaster", "fedavg"}) entry(local).sumsEveryStep = false;
#define DTRAIN_STRATEGY(spec) add(spec());
#include "api/StrategyList.inc"
#undef DTRAIN_STRATEGY
    return r;
  }();
  return r;
}

}  // namespace

std::vector<std::string> strategyNames() {
  std::vector<std::string> names;
  for (const auto& [name, e] : registry()) names.push_back(name);
  return names;
}

std::string StrategyEntry::refuses(const Option& o) const {
  if (auto it = ignores.find(o.id()); it != ignores.end()) return it->second;
  if (auto it = ignores.find(o.group); it != ignores.end()) return it->second;
  for (const auto& g : groups)
    if (g == o.group) return "";
  // Say which strategies do read it.
  std::vector<std::string> readers;
  for (const auto& [other, e] : registry())
    for (const auto& g : e.groups)
      if (g == o.group && !e.ignores.count(o.id()) && !e.ignores.count(o.group)) readers.push_back(other);
  std::string names;
  for (size_t i = 0; i < readers.size(); ++i)
    names += (i == 0 ? "" : i + 1 == readers.size() ? " or " : ", ") + readers[i];
  return "does not apply to --strategy " + name + " (only to --strategy " + names + ")";
}

std::string resolveStrategy(const TrainConfig& c) {
  if (!c.strategy.empty()) return c.strategy;
  if (c.pipelineStages > 1) return "pipeline";  // cuts its stages' layers itself with --tensor-parallel too
  if (c.tensorParallel > 1) return "tensor";
  return c.backend == "mpi" || c.workers > 1 ? "allreduce" : "single";
}

const StrategyEntry& strategyEntry(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : strategyNames()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("unknown strategy '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

}  // namespace dtrain::api
