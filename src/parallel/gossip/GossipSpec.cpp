// --strategy gossip as the run configuration sees it: its option group
// [gossip], its checks and its factory (built into the api layer; registered
// by one line in api/StrategyList.inc).
#include "api/Schema.h"
#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "parallel/gossip/Gossip.h"
#include "parallel/gossip/Topology.h"

namespace dtrain::api {

namespace {

using parallel::gossip::GossipOptions;

void addGossipOptions(Schema& s) {
  s.addGroup("gossip", "Decentralized (gossip) SGD (--strategy gossip)");
  s.add("gossip", "topology", "--topology",
        "The graph each rank averages its model over with its neighbours: ring, torus (2-D), exponential "
        "(neighbours at distance 2^k, SGP's) or complete")
      .strategy(&GossipOptions::topology)
      .oneOf(parallel::gossip::topologyNames)
      .result("topology");
  s.add("gossip", "every", "--gossip-every", "Optimizer steps between two averages with the neighbours")
      .strategy(&GossipOptions::every)
      .range(1)
      .result("gossip_every");
}

}  // namespace

StrategyEntry gossipStrategy() {
  StrategyEntry e;
  e.name = "gossip";
  e.summary = "gossip (decentralized SGD: averages with graph neighbours, --topology)";
  e.groups = trainerGroups({"gossip"});
  e.ignores = noMesh("gossip", {{"memory.zero", kZeroNotHere},
                                {"memory.offload", kOffloadNotHere},
                                {"training.accumulate", "applies to --strategy allreduce"}});
  e.make = [](const runtime::TrainConfig& c, comm::Communicator& comm, const SharedRun&) {
    return std::make_unique<parallel::gossip::Gossip>(comm, c.strategyOptions.get<GossipOptions>());
  };
  e.addOptions = addGossipOptions;
  return e;
}

}  // namespace dtrain::api
