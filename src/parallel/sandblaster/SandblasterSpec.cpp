// --strategy sandblaster as the run configuration sees it: its option group
// [sandblaster], its checks and its factory (built into the api layer;
// registered by one line in api/StrategyList.inc).
#include "api/RankRunner.h"
#include "api/Schema.h"
#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "core/Memory.h"
#include "nn/ModelRegistry.h"
#include "parallel/sandblaster/LbfgsShard.h"
#include "parallel/sandblaster/Sandblaster.h"
#include "parallel/sandblaster/SandblasterConfig.h"
#include "runtime/Task.h"

namespace dtrain::api {

namespace {

using parallel::sandblaster::SandblasterConfig;
using runtime::TrainConfig;

void addSandblasterOptions(Schema& s) {
  s.addGroup("sandblaster", "Sandblaster L-BFGS (--strategy sandblaster --optimizer lbfgs)");
  s.add("sandblaster", "servers", "--sandblaster-servers",
        "Parameter-server shards holding the parameters and the L-BFGS history, which run its "
        "vector operations so the coordinator moves only scalars (0: the coordinator holds them)")
      .strategy(&SandblasterConfig::servers).range(0, 4096).result("sandblaster_servers");
  s.add("sandblaster", "work_units", "--work-units",
        "Units each batch gradient is cut into, handed to workers as they become free "
        "(0: 4 per worker)")
      .strategy(&SandblasterConfig::workUnits).range(0).result("work_units");
  s.add("sandblaster", "backup_tasks", "--backup-tasks",
        "Give the last pending units to a second, free worker; the first answer wins")
      .strategy(&SandblasterConfig::backupTasks).negated("--no-backup-tasks");
  s.add("sandblaster", "data", "--sandblaster-data",
        "Who reads a work unit's samples: workers (each from its own copy of the data, told the "
        "step and the unit's range, as DistBelief's workers read their shards) or coordinator "
        "(it sends them with the unit)")
      .strategy(&SandblasterConfig::data).oneOf({"workers", "coordinator"}).result("sandblaster_data");
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

parallel::sandblaster::SandblasterOptions sandblasterOptions(const TrainConfig& c) {
  const auto& cfg = c.strategyOptions.get<SandblasterConfig>();
  parallel::sandblaster::SandblasterOptions o;
  o.servers = static_cast<int>(cfg.servers);
  o.workUnits = static_cast<int>(cfg.workUnits);
  o.backups = cfg.backupTasks;
  o.workersRead = cfg.data == "workers";
  for (const auto& [rank, ms] : c.stragglerMs) o.stragglerMs[static_cast<int>(rank)] = ms;
  o.randomDelayMs = c.randomDelayMs;
  o.seed = c.seed;
  return o;
}

// Ranks 1..servers hold the parameter shards and run to the end here; so do
// the workers, which compute the units of each batch gradient.
void runShardOrWorker(const TrainConfig& c, comm::Communicator& comm, const SharedRun& shared,
                      const parallel::sandblaster::SandblasterOptions& o) {
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
    return;
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
}

// Rank 0 coordinates L-BFGS; the others never return a strategy.
std::unique_ptr<parallel::Strategy> makeSandblaster(const TrainConfig& c, comm::Communicator& comm,
                                                    const SharedRun& shared) {
  const auto o = sandblasterOptions(c);
  if (comm.rank() == 0) return std::make_unique<parallel::sandblaster::SandblasterCoordinator>(comm, o);
  runShardOrWorker(c, comm, shared, o);
  return nullptr;
}

// --straggler names comm ranks here: 0 the coordinator, 1..S the shards, then the workers.
void checkStragglers(const TrainConfig& c, bool workersKnown) {
  const int64_t servers = c.strategyOptions.get<SandblasterConfig>().servers;
  const int64_t first = 1 + servers, last = servers + c.workers;
  for (const auto& [w, ms] : c.stragglerMs) {
    DTRAIN_CHECK_USAGE(w == 0 || (w >= first && (!workersKnown || w <= last)), "--straggler ", w, ":", ms,
                       ": rank ", w, " is not the coordinator (0) or a worker (", first, "..", last,
                       servers ? "; ranks 1.." + std::to_string(servers) + " are shards" : "", ")");
    DTRAIN_CHECK_USAGE(std::isfinite(ms) && ms >= 0, "--straggler ", w, ":", ms, ": the delay must be >= 0 ms");
  }
}

}  // namespace

StrategyEntry sandblasterStrategy() {
  StrategyEntry e;
  e.name = "sandblaster";
  e.summary = "sandblaster (L-BFGS over work units)";
  e.groups = trainerGroups({"sandblaster"});
  e.ignores = noMesh("sandblaster", {{"memory.zero", kZeroNotHere},
                                     {"ps.servers", "does not apply to --strategy sandblaster (its parameter "
                                      "shards: --sandblaster-servers)"},
                                     {"memory.offload", kOffloadNotHere},
                                     {"lora", "does not combine with --strategy sandblaster (its workers build the plain model)"},
                                     {"training.accumulate", "does not apply to --strategy sandblaster (--work-units cuts each batch)"}});
  e.worldSize = [](const TrainConfig& c) {
    return static_cast<int>(c.workers + 1 + c.strategyOptions.get<SandblasterConfig>().servers);
  };
  e.make = makeSandblaster;
  e.validate = [](const RunConfig& rc) {
    DTRAIN_CHECK_USAGE(rc.train.optimizer == "lbfgs", "--strategy sandblaster runs --optimizer lbfgs "
                       "(its workers compute batch gradients for the coordinator's line search)");
  };
  e.checkStragglers = checkStragglers;
  e.sumsEveryStep = false;  // the coordinator alone logs and decides to stop
  e.batchIsGlobal = true;
  e.addOptions = addSandblasterOptions;
  return e;
}

}  // namespace dtrain::api
