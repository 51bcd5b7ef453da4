#include "api/Train.h"

#include <memory>
#include <mutex>
#include <optional>

#include "api/ConfigFile.h"
#include "api/FederatedRun.h"
#include "api/MpiRun.h"
#include "api/PrepareConfig.h"
#include "api/RankRunner.h"
#include "api/ResultLine.h"
#include "api/StrategyRegistry.h"
#include "comm/local/Local.h"
#include "core/Error.h"
#include "core/Timer.h"
#include "runtime/CheckpointDir.h"
#include "runtime/OutputPaths.h"
#include "runtime/ThreadCount.h"
#include "runtime/Timeline.h"
#include "runtime/Trainer.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::api {

namespace {

// One process, one rank, no communicator.
nlohmann::json runSingle(const RunConfig& rc, Data data) {
  const runtime::TrainConfig& c = rc.train;
  runtime::Trainer trainer(c, std::make_unique<parallel::SingleProcess>(), std::move(data));
  runtime::Timeline timeline;
  timeline.setOrigin(nowMicros());
  if (!c.timeline.empty()) trainer.setTimeline(&timeline);
  runtime::TrainResult r = trainer.run();
  if (!c.timeline.empty()) timeline.write(c.timeline);
  nlohmann::json out = r.toJson();
  addRunFields(out, rc, 1, "none");
  return out;
}

// --workers N --backend local: the ranks (workers, and servers for ps) as
// threads of this process, sharing one copy of the datasets and one timeline.
nlohmann::json runLocal(const RunConfig& rc, Data data) {
  const runtime::TrainConfig& c = rc.train;
  // Process-wide: each rank's kernels use c.threads threads (auto: resolved in train()).
  kernels::configureKernels(c.threads, kernels::parseGemmBackend(c.gemm));
  runtime::Timeline timeline;
  SharedRun shared;
  shared.data = data.train || data.text ? std::move(data) : runtime::loadTaskData(c, true);
  if (!c.timeline.empty()) shared.timeline = &timeline;
  if (strategyEntry(c.strategy).sharesParameters)
    shared.hogwild = std::make_shared<parallel::HogwildShared>(c.workers);
  timeline.setOrigin(nowMicros());
  std::optional<runtime::TrainResult> result;
  std::mutex resultMutex;
  comm::local::runLocal(worldSizeFor(c), [&](comm::Communicator& comm) {
    auto r = runRank(c, comm, shared);
    std::lock_guard<std::mutex> lock(resultMutex);
    if (r) result = std::move(r);
  }, commTimeout(c.callTimeoutS));
  DTRAIN_CHECK(result, "no rank reported a result");
  if (!c.timeline.empty()) timeline.write(c.timeline);
  nlohmann::json out = result->toJson();
  addRunFields(out, rc, c.workers, "local");
  return out;
}

// One rank of `mpirun -np N ... --backend mpi`.
nlohmann::json runMpiRank(RunConfig rc, bool workersGiven, Data data) {
  return runMpiProcess([&](comm::Communicator& comm) {
    runtime::TrainConfig& c = rc.train;
    // The ranks beyond the workers (parameter servers) come first.
    const int servers = strategyEntry(c.strategy).worldSize(c) - c.workers;
    DTRAIN_CHECK_USAGE(comm.size() > servers, "--servers ", servers, " leaves no worker among mpirun's ",
                       comm.size(), " processes (mpirun -np S+W: the first S serve)");
    DTRAIN_CHECK_USAGE(!workersGiven || c.workers == comm.size() - servers, "--workers ", c.workers,
                       " does not match mpirun's ", comm.size(), " processes",
                       servers ? detail::concat(" minus ", servers, " servers") : std::string(),
                       " (with --backend mpi, mpirun -np sets the workers)");
    c.workers = comm.size() - servers;
    validateRun(rc, true);
    runtime::Timeline timeline;
    comm.barrier();  // aligns the ranks' timeline clocks
    timeline.setOrigin(nowMicros());
    SharedRun shared;
    shared.data = std::move(data);
    if (!c.timeline.empty()) shared.timeline = &timeline;
    std::optional<runtime::TrainResult> result = runRank(c, comm, shared);
    if (!c.timeline.empty()) timeline.writeGathered(comm, c.timeline);
    nlohmann::json out;
    if (result) {
      out = result->toJson();
      addRunFields(out, rc, c.workers, "mpi");
    }
    return out;
  }, commLimits(rc.train.callTimeoutS, rc.train.commTimeoutS));
}

}  // namespace

Sources sourcesFromValues(const RunConfig& config) {
  const RunConfig defaults;
  Sources src;
  for (const Option& o : schema().options())
    if (o.get(config) != o.get(defaults)) src.where[o.id()] = o.name();
  return src;
}

RunConfig prepared(RunConfig config, const Sources& sources) {
  prepare(config, sources, config.train.backend != "mpi");
  return config;
}

nlohmann::json train(RunConfig config, Data data) {
  const Sources src = sourcesFromValues(config);
  return train(std::move(config), src, std::move(data));
}

nlohmann::json train(RunConfig rc, const Sources& src, Data data) {
  const bool mpi = rc.train.backend == "mpi";
  // Under mpi the workers are known only once MPI is up (runMpiRank validates again).
  prepare(rc, src, !mpi);
  // Data handed over in memory: the record says so (no file was read).
  if (data.train) {
    rc.train.dataset = "memory";
    rc.train.memoryTestSet = data.test != nullptr;
  }
  // --threads auto: the cores of this machine shared by the ranks on it; the
  // result line and the run's record then say how many.
  rc.train.threads = runtime::resolvedThreads(
      rc.train, mpi ? runtime::mpiRanksOnThisMachine() : std::max(1, rc.train.workers));
  runtime::resolveCheckpointFlags(rc.train);  // --resume -> --load
  runtime::checkOutputPaths(rc.train);        // files written later: writable before training
  if (!strategyEntry(rc.train.strategy).make) return runFederated(rc, std::move(data));  // its own rounds
  if (mpi) return runMpiRank(std::move(rc), src.givenFlag("--workers"), std::move(data));
  if (strategyEntry(rc.train.strategy).oneProcess) return runSingle(rc, std::move(data));
  return runLocal(rc, std::move(data));
}

RunConfig configFromToml(const std::string& text, const std::string& name) {
  RunConfig rc;
  Sources src;
  loadConfigText(text, name, rc, src);
  return rc;
}

RunConfig configFromFile(const std::string& path) {
  RunConfig rc;
  Sources src;
  loadConfigFile(path, rc, src);
  return rc;
}

}  // namespace dtrain::api
