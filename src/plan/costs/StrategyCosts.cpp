// Every strategy's cost model, by the name it registers under
// (api/StrategyList.inc). A strategy without an entry is refused by the
// simulator, never predicted as another (tests/plan: every registered strategy
// has an entry here or a refusal).
#include <map>

#include "core/Error.h"
#include "parallel/localsgd/LocalSgdConfig.h"
#include "plan/costs/StrategyCost.h"

namespace dtrain::plan {

SyncCost noSync(const SyncContext&, SyncCost step) { return step; }

namespace {

StrategyCost allreduceFamily(AllreduceSyncOptions o) {
  StrategyCost s;
  s.sync = [o](const SyncContext& x, SyncCost step) { return allreduceSync(x, step, o); };
  return s;
}

const std::map<std::string, StrategyCost>& costs() {
  static const std::map<std::string, StrategyCost> table = [] {
    std::map<std::string, StrategyCost> t;
    // The replicas of a mesh (pipeline stages, tensor slices) sum their
    // gradients as data parallelism does, without its overlap and factors.
    for (const char* name : {"single", "pipeline", "tensor"}) t[name] = allreduceFamily({});
    t["allreduce"] = allreduceFamily({.sufficientFactors = true, .overlapsBackward = true});
    StrategyCost& local = t["local-sgd"] = allreduceFamily({.periodic = true});
    local.lossy = [](const runtime::TrainConfig&) { return std::string("--strategy local-sgd"); };
    local.measured = {nullptr,
                      [](const runtime::TrainConfig& c) {
                        return c.strategyOptions.get<parallel::localsgd::LocalSgdConfig>().syncEvery == 4
                                   ? std::string() : std::string("--sync-every 4");
                      },
                      "-0.09 accuracy points (0.8535 vs 0.8544; H = 16: -0.30, H = 64: -0.55) (mlp, 4 "
                      "emulated hosts, 3 epochs; PERFORMANCE.md, \"Local SGD and DiLoCo\")"};
    StrategyCost& hogwild = t["hogwild"];
    hogwild.sync = noSync;
    hogwild.lossy = [](const runtime::TrainConfig&) { return std::string("--strategy hogwild"); };
    hogwild.measured.measured = "-0.53 accuracy points (0.8646 vs allreduce's 0.8699) (mlp, 4 workers, 5 "
                                "epochs, a straggler; PERFORMANCE.md, \"Parameter servers and Hogwild!\")";
    StrategyCost& ps = t["ps"];
    ps.sync = parameterServerSync;
    ps.syncTerm = "parameter-server traffic";
    ps.workersOnlyCompute = ps.hasServers = true;
    ps.lossy = [](const runtime::TrainConfig& c) {
      return c.consistency != "sync" ? "--consistency " + c.consistency : std::string();
    };
    ps.measured = {[](const runtime::TrainConfig& c) { return c.consistency == "async"; }, nullptr,
                   "-0.82 accuracy points (0.8617 vs allreduce's 0.8699) (mlp, 4 workers, 5 epochs, a "
                   "straggler; PERFORMANCE.md, \"Parameter servers and Hogwild!\")"};
    StrategyCost& sandblaster = t["sandblaster"];
    sandblaster.sync = sandblasterSync;
    sandblaster.workersOnlyCompute = true;
    StrategyCost& gossip = t["gossip"];
    gossip.sync = gossipSync;
    gossip.syncTerm = "gossip rounds";
    gossip.lossy = [](const runtime::TrainConfig&) { return std::string("--strategy gossip"); };
    return t;
  }();
  return table;
}

}  // namespace

const StrategyCost& strategyCost(const std::string& strategy) {
  auto it = costs().find(strategy);
  DTRAIN_CHECK_USAGE(it != costs().end(), "the simulator has no model of --strategy ", strategy,
                     " yet; predict another strategy or drop --machine");
  return it->second;
}

}  // namespace dtrain::plan
