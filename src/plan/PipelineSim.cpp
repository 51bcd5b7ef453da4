#include "plan/PipelineSim.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/Error.h"
#include "parallel/pipeline/Schedule.h"
#include "plan/Machine.h"

namespace dtrain::plan {

namespace pl = parallel::pipeline;

namespace {

// One direction of a host's link: the intervals it is busy, in time order,
// and its token bucket (netsim's tbf), in seconds of line rate: `level` when
// its last message ended at `since` (initially full).
struct Link {
  std::vector<std::pair<double, double>> busy;
  double level = std::numeric_limits<double>::infinity(), since = 0;
};

// A message takes the earliest gap where both its links are free, so the
// order the simulation reaches the messages in does not matter to the gaps
// (the buckets' levels follow that order: about the order of time).
double firstFreeEnd(const Link& l, double start, double seconds) {
  for (const auto& [s, e] : l.busy)
    if (s < start + seconds && start < e) return e;  // overlaps: try after it
  return -1;
}

// The bucket at `t`: what it held when the link last went idle, refilled at
// line rate since (up to its size, refillS).
double bucketAt(const Link& l, double t, double refillS) {
  return std::min(refillS, l.level + std::max(0.0, t - l.since));
}

// The message starts in the first gap of both links from `ready`; what both
// buckets hold goes through at once (up to `saving`: the message's size in
// seconds of line rate, or the bucket's if smaller), the rest at line rate.
// Each bucket keeps what it held beyond the message.
double reserve(Link& out, Link& in, double ready, double seconds, double saving, double refillS) {
  double t = ready;
  for (;;) {
    const double a = firstFreeEnd(out, t, seconds), b = firstFreeEnd(in, t, seconds);
    if (a < 0 && b < 0) break;
    t = std::max({t, a, b});
  }
  if (saving > 0) {
    const double taken = std::min({saving, bucketAt(out, t, refillS), bucketAt(in, t, refillS)});
    seconds -= taken;
    for (Link* l : {&out, &in}) {
      l->level = std::max(0.0, bucketAt(*l, t, refillS) - saving);
      l->since = t + seconds;
    }
  }
  for (Link* l : {&out, &in})
    l->busy.insert(std::upper_bound(l->busy.begin(), l->busy.end(), std::make_pair(t, t)), {t, t + seconds});
  return t + seconds;
}

}  // namespace

PipelineRun simulatePipeline(const std::string& schedule, int p, int m, int v, const std::vector<double>& fwd,
                             const std::vector<double>& bwd, const PipelineLinks& links, bool keepSpans,
                             bool senderBusy, const PipelineCores& cores) {
  const pl::ScheduleKind kind = pl::scheduleFromName(schedule);
  std::vector<std::vector<pl::PipeOp>> ops(p);
  for (int s = 0; s < p; ++s) ops[s] = pl::stageOps(kind, s, p, m, v);
  const int chunks = p * v;
  DTRAIN_CHECK(static_cast<int>(links.seconds.size()) >= chunks - 1, "pipeline simulation: ",
               links.seconds.size(), " message times for ", chunks, " chunks");
  const bool shared = !links.host.empty();
  std::map<int, Link> out, in;  // per host
  // Per (chunk k, micro-batch): when its forward output reaches chunk k + 1,
  // and when its input gradient reaches chunk k - 1; -1: not yet sent.
  std::vector<double> fArrive(static_cast<size_t>(chunks) * m, -1), bArrive(static_cast<size_t>(chunks) * m, -1);
  std::vector<char> fDone(static_cast<size_t>(chunks) * m, 0);
  std::vector<size_t> next(p, 0);
  std::vector<double> free(p, 0);
  // Each stage's compute now running (operations run in the order they
  // start, so the spans covering a start are known when it is reached).
  std::vector<double> computeFrom(p, 0), computeTo(p, 0);
  PipelineRun run;
  run.computeS.assign(p, 0);
  size_t remaining = 0;
  for (const auto& o : ops) remaining += o.size();
  auto send = [&](int from, int to, double at, int boundary) {
    double seconds = links.seconds[boundary];
    if (!shared || links.host[from] == links.host[to]) return at + seconds;
    const double saving = links.burstSaving.empty() ? 0 : links.burstSaving[boundary];
    return reserve(out[links.host[from]], in[links.host[to]], at, seconds, saving, links.refillS);
  };
  while (remaining > 0) {
    // The runnable operation that can start first (the links are reserved
    // in about the order of time).
    int best = -1;
    double bestReady = std::numeric_limits<double>::infinity();
    for (int s = 0; s < p; ++s) {
      if (next[s] >= ops[s].size()) continue;
      const pl::PipeOp& op = ops[s][next[s]];
      const int k = op.chunk * p + s;
      const size_t at = static_cast<size_t>(k) * m + op.micro;
      double ready = free[s];
      if (op.forward) {
        if (k > 0) {
          if (fArrive[at - m] < 0) continue;
          ready = std::max(ready, fArrive[at - m]);
        }
      } else {
        if (!fDone[at]) continue;
        if (k < chunks - 1) {
          if (bArrive[at + m] < 0) continue;
          ready = std::max(ready, bArrive[at + m]);
        }
      }
      if (ready < bestReady) best = s, bestReady = ready;
    }
    DTRAIN_CHECK(best >= 0, "pipeline simulation: the schedule deadlocks");
    const int s = best;
    const pl::PipeOp& op = ops[s][next[s]];
    const int k = op.chunk * p + s;
    const size_t at = static_cast<size_t>(k) * m + op.micro;
    const std::vector<double>& comm = op.forward ? cores.forwardCommS : cores.backwardCommS;
    const double commS = comm.empty() ? 0 : comm[s];
    double computeS = (op.forward ? fwd[s] : bwd[s]) - commS;
    if (cores.slots > 0) {
      int busy = 1;
      for (int o = 0; o < p; ++o)
        if (o != s && computeFrom[o] <= bestReady && bestReady < computeTo[o]) ++busy;
      computeS *= oversubscribedShare(std::max(1.0, busy * cores.copies / cores.slots), cores.slowdown);
    }
    computeFrom[s] = bestReady;
    computeTo[s] = bestReady + computeS;
    run.computeS[s] += computeS;
    const std::vector<double>& sums = op.forward ? links.forwardSumS : links.backwardSumS;
    double end = bestReady + computeS + commS;
    if (shared && !sums.empty() && sums[s] > 0) {
      const double saving = (op.forward ? links.forwardSumSaving : links.backwardSumSaving)[s];
      const int h = links.host[s];
      end = reserve(out[h], in[h], bestReady + computeS, sums[s], saving, links.refillS);
    }
    free[s] = end;
    if (op.forward) {
      fDone[at] = 1;
      if (k < chunks - 1) fArrive[at] = send(s, (k + 1) % p, end, k);
    } else if (k > 0) {
      bArrive[at] = send(s, (k - 1) % p, end, k - 1);
    }
    // senderBusy: the sender waits for its message (MPI progresses a large
    // isend only inside MPI calls: Open MPI's TCP transport has no progress
    // thread). Measured (mlp, 4 emulated hosts at 100 Mbit/s): GPipe and 1F1B
    // take the same time, which free sends would put 57% apart.
    if (senderBusy && op.forward && k < chunks - 1) free[s] = fArrive[at];
    if (senderBusy && !op.forward && k > 0) free[s] = bArrive[at];
    if (keepSpans) run.ops.push_back({s, op.forward, op.micro, op.chunk, bestReady, end});
    ++next[s];
    --remaining;
  }
  for (double f : free) run.makespan = std::max(run.makespan, f);
  return run;
}

PipelineRun simulatePipeline(const std::string& schedule, int p, int m, int v, const std::vector<double>& fwd,
                             const std::vector<double>& bwd, double p2p, bool keepSpans, bool senderBusy,
                             const PipelineCores& cores) {
  PipelineLinks links;
  links.seconds.assign(std::max(0, p * v - 1), p2p);
  return simulatePipeline(schedule, p, m, v, fwd, bwd, links, keepSpans, senderBusy, cores);
}

}  // namespace dtrain::plan
