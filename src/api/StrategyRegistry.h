#pragma once
// The strategies a run can use, by name: each entry says which option groups it
// reads (a given option of another group is refused, not ignored), how many
// ranks it needs, and builds one rank's part. A new strategy is a folder
// src/parallel/<name>/ whose spec (<Name>Spec.cpp, built into this layer)
// returns its entry, with its own option group, plus one line in
// api/StrategyList.inc; not a branch in the trainer or the CLI.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/Option.h"
#include "comm/Communicator.h"
#include "parallel/Strategy.h"
#include "parallel/allreduce/DataParallel.h"
#include "runtime/TrainConfig.h"

namespace dtrain::api {

struct SharedRun;
class Schema;

struct StrategyEntry {
  std::string name;
  std::vector<std::string> groups;  // the option groups it reads
  // Options (or whole groups) it does not read, with the refusal's text: option
  // id or group -> "does not apply to --strategy fedavg (use --local-batch)".
  std::map<std::string, std::string> ignores;
  // Ranks of the communicator the strategy needs (by default its workers; plus servers for ps);
  // null for a strategy that runs its own loop (fedavg).
  std::function<int(const runtime::TrainConfig&)> worldSize = [](const runtime::TrainConfig& c) {
    return c.workers;
  };
  // This rank's strategy, or null when the rank does not train (a parameter
  // server: the factory runs its loop to the end before returning).
  std::function<std::unique_ptr<parallel::Strategy>(const runtime::TrainConfig&,
                                                    comm::Communicator&, const SharedRun&)>
      make;
  // Checks of the options only this strategy reads (null: none beyond the trainer's).
  std::function<void(const RunConfig&)> validate;
  // Checks --straggler's keys, which name workers 0..W-1 unless the strategy
  // delays ranks of its own layout (Sandblaster's coordinator and workers).
  std::function<void(const runtime::TrainConfig&, bool workersKnown)> checkStragglers =
      [](const runtime::TrainConfig& c, bool workersKnown) { c.validateStragglers(workersKnown); };
  // Runs as one process without a communicator (no ranks to start).
  bool oneProcess = false;
  // Its ranks (threads of one process) share one parameter set (Hogwild!).
  bool sharesParameters = false;
  // Its ranks sum a number over all ranks between steps: whether any was asked
  // to stop, and the logged loss (parallel::Strategy's anyRankStops and
  // reduceMetric, which parameter servers, Sandblaster and Hogwild! keep local).
  // The simulator charges those sums.
  bool sumsEveryStep = true;
  // --batch-size is the whole step's batch, which its workers cut into work units
  // (Sandblaster), not each worker's.
  bool batchIsGlobal = false;

  // Its name and a few words for --strategy's help.
  std::string summary;
  // Declares its own option group (null: it reads only the trainer's groups, api/groups/).
  std::function<void(Schema&)> addOptions;

  // "" when the strategy reads the option, else the refusal's text.
  std::string refuses(const Option& o) const;
};

// The configuration's checks: the trainer's, then the strategy's (UsageError).
// workersKnown false: under mpi before MPI is up (the rank checks again).
void validateRun(const RunConfig& rc, bool workersKnown);
// Throws UsageError naming the known strategies on an unknown name.
const StrategyEntry& strategyEntry(const std::string& name);
std::vector<std::string> strategyNames();
// The strategy a configuration runs: --strategy, or the one its flags imply
// (pipeline, tensor, allreduce with more than one worker or under mpi, single).
std::string resolveStrategy(const runtime::TrainConfig& c);
// The allreduce strategy's options of a configuration, for the strategies that
// average with its buckets (checked against the backend).
parallel::DataParallelOptions dataParallelOptions(const runtime::TrainConfig& c, comm::Communicator& comm);
// The allreduce strategy (or ZeRO's, with --zero) on `comm`: also the dp
// dimension of a pipeline or tensor-parallel mesh (parallel/allreduce/AllreduceSpec.cpp).
std::unique_ptr<parallel::Strategy> makeDataParallel(const runtime::TrainConfig& c, comm::Communicator& comm);
// The refusals of the meshes (pipeline, tensor).
std::map<std::string, std::string> meshIgnores();
// What the meshes' options share: placement, when the whole model is gathered,
// and their dp dimension (the allreduce strategy). `c` must outlive the strategy.
template <typename MeshOptions>
void setMeshOptions(MeshOptions& o, const runtime::TrainConfig& c) {
  o.spread = c.placement == "spread";
  o.gatherEvery = c.evalEvery;
  o.gatherOptimizer = !c.save.empty();
  o.makeDataParallel = [&c](comm::Communicator& dp) { return makeDataParallel(c, dp); };
}
// Refusals several strategies share.
extern const char* const kZeroNotHere;     // --zero
extern const char* const kOffloadNotHere;  // --offload
extern const char* const kNoPeriodicCheckpoints;  // --checkpoint-every
// The option groups every strategy driven by the trainer reads, and `more`.
std::vector<std::string> trainerGroups(std::vector<std::string> more);
// The refusals of a strategy without a mesh (the mesh options choose their own), and `ignores`.
std::map<std::string, std::string> noMesh(const std::string& name, std::map<std::string, std::string> ignores);

}  // namespace dtrain::api
