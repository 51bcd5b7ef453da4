// --strategy gossip's round (parallel/gossip/): every rank sends its model to
// each neighbour and receives theirs, all ranks at once, then averages. A
// host's link carries its ranks' messages to other hosts together; a rank's
// messages within the host go beside them. The step waits for the round
// (it follows the optimizer step), one round per --gossip-every steps.
#include <algorithm>

#include "parallel/gossip/GossipOptions.h"
#include "parallel/gossip/Topology.h"
#include "plan/Collectives.h"
#include "plan/Layout.h"
#include "plan/costs/StrategyCost.h"

namespace dtrain::plan {

SyncCost gossipSync(const SyncContext& x, SyncCost out) {
  const auto& o = x.rc.train.strategyOptions.get<parallel::gossip::GossipOptions>();
  const Placement& pl = x.l.placement;
  const double bytes = 4 * x.gradParams;
  double round = 0, degree = 0;
  for (int r = 0; r < x.l.ranks; ++r) {
    const auto peers = parallel::gossip::neighbours(o.topology, r, x.l.ranks);
    // The messages that leave r's host: every rank of the host sends as many.
    int remote = 0;
    for (int j : peers) remote += pl.host(j) != pl.host(r);
    double t = 0;
    for (int j : peers) t = std::max(t, p2pTime(x.m, pl, r, j, bytes, remote * pl.ranksPerHost));
    round = std::max(round, t);
    degree = std::max(degree, static_cast<double>(peers.size()));
  }
  // The average streams the rank's model and its neighbours' through memory.
  round += (degree + 1) * bytes / x.m.memoryBytesPerS * x.computeShare;
  const double every = static_cast<double>(o.every);
  out.seconds += round / every;
  out.exposedS += round / every;
  out.bytesPerRank += degree * bytes / every;
  return out;
}

}  // namespace dtrain::plan
