// --strategy local-sgd as the run configuration sees it: its option group
// [localsgd] and its factory (built into the api layer; registered by one
// line in api/StrategyList.inc).
#include "api/Schema.h"
#include "api/StrategyRegistry.h"
#include "parallel/localsgd/LocalSgd.h"
#include "parallel/localsgd/LocalSgdConfig.h"

namespace dtrain::api {

namespace {

using parallel::localsgd::LocalSgdConfig;

void addLocalSgdOptions(Schema& s) {
  s.addGroup("localsgd", "Local SGD and DiLoCo (--strategy local-sgd)");
  s.add("localsgd", "sync_every", "--sync-every",
        "Inner optimizer steps of every worker on its own batches between parameter averages (H)")
      .strategy(&LocalSgdConfig::syncEvery).range(1);
  s.add("localsgd", "start_step", "--local-sgd-start-step",
        "Synchronous allreduce steps before local SGD starts (post-local SGD)")
      .strategy(&LocalSgdConfig::startStep).range(0);
  s.add("localsgd", "outer_optimizer", "--outer-optimizer",
        "Step on the workers' averaged parameter delta: sgd (lr 1, no momentum: plain averaging) "
        "or nesterov (DiLoCo: --outer-lr 0.7 --outer-momentum 0.9)")
      .strategy(&LocalSgdConfig::outerOptimizer).oneOf({"sgd", "nesterov"}).result("outer_optimizer");
  s.add("localsgd", "outer_lr", "--outer-lr", "Outer learning rate")
      .strategy(&LocalSgdConfig::outerLr).above(0).result("outer_lr");
  s.add("localsgd", "outer_momentum", "--outer-momentum", "Outer momentum, in [0, 1)")
      .strategy(&LocalSgdConfig::outerMomentum).range(0, 0.9999).result("outer_momentum");
}

// H local steps per worker, then the parameters' delta averaged (with the
// allreduce strategy's buckets, algorithm and compressor) and an outer step.
std::unique_ptr<parallel::Strategy> makeLocalSgd(const runtime::TrainConfig& c, comm::Communicator& comm,
                                                 const SharedRun&) {
  const auto& cfg = c.strategyOptions.get<LocalSgdConfig>();
  parallel::localsgd::LocalSgdOptions o;
  o.syncEvery = cfg.syncEvery;
  o.startStep = cfg.startStep;
  o.outer.nesterov = cfg.outerOptimizer == "nesterov";
  o.outer.lr = cfg.outerLr;
  o.outer.momentum = cfg.outerMomentum;
  const parallel::DataParallelOptions dp = dataParallelOptions(c, comm);
  o.fusionMb = dp.fusionMb;
  o.overlap = dp.overlap;
  o.algo = dp.algo;
  o.compress = dp.compress;
  return std::make_unique<parallel::localsgd::LocalSgd>(comm, std::move(o));
}

}  // namespace

StrategyEntry localSgdStrategy() {
  StrategyEntry e;
  e.name = "local-sgd";
  e.summary = "local-sgd (periodic averaging, DiLoCo)";
  e.groups = trainerGroups({"allreduce", "compress", "localsgd"});
  e.ignores = noMesh("local-sgd", {{"memory.zero", kZeroNotHere}, {"memory.offload", kOffloadNotHere}});
  e.make = makeLocalSgd;
  e.addOptions = addLocalSgdOptions;
  return e;
}

}  // namespace dtrain::api
