// The gradient syncs through servers: parameter servers (every worker pushes
// its gradient and pulls the parameters) and Sandblaster (a coordinator hands
// out work units; parameters and unit gradients through it or its shards).
#include <algorithm>

#include "parallel/sandblaster/SandblasterConfig.h"
#include "plan/Layout.h"
#include "plan/costs/StrategyCost.h"

namespace dtrain::plan {

namespace {

// Gradient evaluations per L-BFGS iteration (the step's and its line search's
// trials), as the trainer's L-BFGS on the mlp averages them.
constexpr double kSandblasterEvaluationsPerIteration = 2.2;

}  // namespace

SyncCost parameterServerSync(const SyncContext& x, SyncCost out) {
  const auto& c = x.rc.train;
  const Layout& l = x.l;
  const Machine& m = x.m;
  const double gradBytes = 4 * x.gradParams;
  // Every worker pushes its gradient and pulls the parameters; the servers'
  // host link carries all workers' traffic, a worker host's link its workers'.
  const int hostsUsed = l.placement.hosts;
  const int serverHostWorkers = std::max(0, std::min(l.placement.ranksPerHost - l.servers, l.workers));
  const double remoteWorkers = hostsUsed > 1 ? l.workers - serverHostWorkers : 0;
  const LinkCost inter = m.link(LinkKind::InterHost);
  const LinkCost local = m.link(l.placement.threads ? LinkKind::SameProcess : LinkKind::IntraHost);
  const double pushBytes = gradBytes * compressionRatio(c, x.p), pullBytes = gradBytes;
  const double serverSide = remoteWorkers * (pushBytes + pullBytes) / inter.bytesPerS +
                            (l.workers - remoteWorkers) * (pushBytes + pullBytes) / l.servers / local.bytesPerS;
  const double workerSide = hostsUsed > 1 ? l.placement.ranksPerHost * (pushBytes + pullBytes) / inter.bytesPerS
                                          : (pushBytes + pullBytes) / local.bytesPerS;
  const bool async = c.consistency != "sync";
  // Synchronous: the servers' link does not carry the pulls and the next
  // pushes strictly one after the other. The first worker its parameters
  // reach computes and pushes while the others are still pulled: one worker's
  // transfer overlaps.
  const double overlap = !async && remoteWorkers > 1 ? std::min(pushBytes, pullBytes) / inter.bytesPerS : 0;
  out.seconds = 2 * (hostsUsed > 1 ? inter.alphaS : local.alphaS) + std::max(serverSide - overlap, workerSide);
  out.exposedS = async ? std::max(0.0, out.seconds / c.pushEvery - out.computeS) : out.seconds;
  out.bytesPerRank += pushBytes;
  return out;
}

SyncCost sandblasterSync(const SyncContext& x, SyncCost out) {
  const auto& c = x.rc.train;
  const Layout& l = x.l;
  const AnalyticModel& p = x.p;
  // parallel/sandblaster: per gradient evaluation the coordinator cuts the
  // batch into K units for the W workers (each computes about its share), a
  // worker gets the parameters once per evaluation and answers one gradient
  // per unit; with S shards the parameters come from, and the unit gradients
  // go to, the shards, and the coordinator sends only the samples, or with
  // --sandblaster-data workers (the default) only unit headers: the workers
  // read the samples themselves. L-BFGS's line search evaluates the batch
  // more than once per iteration.
  const auto& o = c.strategyOptions.get<parallel::sandblaster::SandblasterConfig>();
  const double W = l.workers, S = static_cast<double>(o.servers);
  const double K = o.workUnits > 0 ? static_cast<double>(o.workUnits) : 4 * W;
  const double evals = kSandblasterEvaluationsPerIteration;
  const double paramBytes = 4.0 * static_cast<double>(p.params());
  // A unit's samples: a language model's input and target windows of int64
  // tokens; a classifier's features, taken as fp32 (raw uint8 images such as
  // Fashion-MNIST's travel as 1 byte each, 4x less).
  const double sampleBytes = p.languageModel ? 2.0 * 8.0 * static_cast<double>(p.tokensPerSample)
                                             : 4.0 * static_cast<double>(p.width);
  const double samples = o.data == "workers" ? 0.0 : static_cast<double>(l.samplesPerStep);
  const LinkCost link = x.m.link(l.placement.threads ? LinkKind::SameProcess
                                 : l.placement.hosts > 1 ? LinkKind::InterHost : LinkKind::IntraHost);
  const double coordinatorOut = samples * sampleBytes + (S > 0 ? 0 : W * paramBytes);
  const double coordinatorIn = S > 0 ? 0 : K * paramBytes;
  const double perShard = S > 0 ? (W + K) * paramBytes / S : 0;
  const double perEval = std::max({coordinatorOut, coordinatorIn, perShard}) / link.bytesPerS + K * link.alphaS;
  out.seconds = evals * perEval;
  out.computeS *= evals;
  // Units stream: workers compute one while the next is on its way.
  out.exposedS = std::max(0.0, out.seconds - out.computeS);
  out.bytesPerRank += evals * std::max(coordinatorOut, perShard);
  return out;
}

}  // namespace dtrain::plan
