// --strategy ps (parameter servers) as the run configuration sees it: its
// checks and factory (built into the api layer; registered by one line in
// api/StrategyList.inc). Its [ps] options: api/groups/PsGroups.cpp.
#include "api/RankRunner.h"
#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "core/Memory.h"
#include "nn/Lora.h"
#include "nn/ModelRegistry.h"
#include "optim/Factory.h"
#include "parallel/compress/Compressor.h"
#include "parallel/ps/Server.h"
#include "parallel/ps/Worker.h"
#include "runtime/LoraSetup.h"
#include "runtime/Task.h"
#include "runtime/Trainer.h"

namespace dtrain::api {

using runtime::TrainConfig;

namespace {

// Ranks 0..servers-1 serve (the model only gives them the parameter names and
// shapes) and run to the end here; the others train.
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

// What sharded servers cannot do. (Which consistency mode reads which [ps]
// option is the options' own condition, api/groups/PsGroups.cpp.)
void validatePs(const RunConfig& rc) {
  const TrainConfig& c = rc.train;
  DTRAIN_CHECK_USAGE(!optim::needsWholeLayerNorms(c.optimizer), "--optimizer ", c.optimizer,
                     " needs whole-layer norms, which "
                     "sharded servers do not have; use sgd, adam, adamw or adagrad with --strategy ps");
  // The pushes are compressed with the compressors that have a point-to-point
  // form (parallel/ps/PushCodec.h).
  if (c.compress != "none") parallel::compress::requireMessageCodec(c.compress);
}

}  // namespace

StrategyEntry psStrategy() {
  StrategyEntry e;
  e.name = "ps";
  e.summary = "ps (parameter servers)";
  e.groups = trainerGroups({"ps", "compress"});
  e.ignores = noMesh("ps", {{"compress.collective", "applies to allreduce (ps pushes go to one server)"},
                            {"memory.zero", kZeroNotHere},
                            {"memory.offload", kOffloadNotHere},
                            {"checkpoint.every", kNoPeriodicCheckpoints},
                            {"training.accumulate", "applies to --strategy allreduce (parameter servers "
                             "accumulate with --push-every)"}});
  e.worldSize = [](const TrainConfig& c) { return c.servers + c.workers; };
  e.make = makePs;
  e.validate = validatePs;
  e.sumsEveryStep = false;  // each worker logs its own loss; the servers never step
  return e;
}

}  // namespace dtrain::api
