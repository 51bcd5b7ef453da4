#include "plan/PipelineSim.h"

#include <algorithm>
#include <limits>

#include "core/Error.h"
#include "parallel/pipeline/PipelineSchedule.h"
#include "plan/Machine.h"
#include "plan/SharedLinks.h"

namespace dtrain::plan {

namespace pl = parallel::pipeline;

namespace {

// When a message or an operation's wait ends: a fixed time, or a message's
// arrival on the shared links.
struct Arrival {
  double at = -1;  // with flow -1: not yet sent
  int flow = -1;
  bool sent() const { return at >= 0 || flow >= 0; }
  // -1: not yet arrived.
  double when(const SharedLinks& net) const { return flow >= 0 ? net.arrived(flow) : at; }
};

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
  SharedLinks net(links.refillS);
  auto outLink = [](int host) { return 2 * host; };
  auto inLink = [](int host) { return 2 * host + 1; };
  // Per (chunk k, micro-batch): when its forward output reaches chunk k + 1,
  // and when its input gradient reaches chunk k - 1.
  std::vector<Arrival> fArrive(static_cast<size_t>(chunks) * m), bArrive(static_cast<size_t>(chunks) * m);
  std::vector<char> fDone(static_cast<size_t>(chunks) * m, 0);
  std::vector<size_t> next(p, 0);
  std::vector<double> free(p, 0);
  std::vector<Arrival> sending(p);  // senderBusy: the message each stage waits to arrive
  // An operation whose tensor-parallel sums are on the links ends when they
  // arrive: its stage waits, and its span starts at opStart.
  std::vector<int> summing(p, -1);
  std::vector<double> opStart(p, 0);
  // Each stage's compute now running (operations run in the order they
  // start, so the spans covering a start are known when it is reached).
  std::vector<double> computeFrom(p, 0), computeTo(p, 0);
  PipelineRun run;
  run.computeS.assign(p, 0);
  size_t remaining = 0;
  for (const auto& o : ops) remaining += o.size();
  auto send = [&](int from, int to, double at, int boundary) -> Arrival {
    const double seconds = links.seconds[boundary];
    if (!shared || links.host[from] == links.host[to]) return {at + seconds, -1};
    const double saving = links.burstSaving.empty() ? 0 : links.burstSaving[boundary];
    return {-1, net.send(from * p + to, outLink(links.host[from]), inLink(links.host[to]), at, seconds, saving)};
  };
  // Stage s's current operation ends at `end`: its output leaves.
  auto complete = [&](int s, double end) {
    const pl::PipeOp& op = ops[s][next[s]];
    const int k = op.chunk * p + s;
    const size_t at = static_cast<size_t>(k) * m + op.micro;
    free[s] = end;
    Arrival out;  // its output's message (none from the last chunk's forward, the first's backward)
    if (op.forward) {
      fDone[at] = 1;
      if (k < chunks - 1) out = fArrive[at] = send(s, (k + 1) % p, end, k);
    } else if (k > 0) {
      out = bArrive[at] = send(s, (k - 1) % p, end, k - 1);
    }
    // senderBusy: the sender waits for its message (MPI progresses a large
    // isend only inside MPI calls: Open MPI's TCP transport has no progress
    // thread), so modelling the send as free under-predicts pipelines whose
    // messages are large against the link.
    sending[s] = senderBusy ? out : Arrival{};
    if (keepSpans) run.ops.push_back({s, op.forward, op.micro, op.chunk, opStart[s], end});
    ++next[s];
    --remaining;
  };
  // Event by event: the operation that can start first, unless the links
  // change before it (a message arrives, and may let an operation start sooner).
  for (;;) {
    for (int s = 0; s < p; ++s)
      if (summing[s] >= 0 && net.arrived(summing[s]) >= 0) {
        complete(s, net.arrived(summing[s]));
        summing[s] = -1;
      }
    if (remaining == 0) break;
    int best = -1;
    double bestReady = std::numeric_limits<double>::infinity();
    for (int s = 0; s < p; ++s) {
      if (next[s] >= ops[s].size() || summing[s] >= 0) continue;
      const pl::PipeOp& op = ops[s][next[s]];
      const int k = op.chunk * p + s;
      const size_t at = static_cast<size_t>(k) * m + op.micro;
      if (!op.forward && !fDone[at]) continue;
      double ready = std::max(free[s], net.now());
      auto waitFor = [&](const Arrival& a) {  // false: not yet arrived
        const double t = a.sent() ? a.when(net) : -1;
        ready = std::max(ready, t);
        return t >= 0;
      };
      // Its input (or its output's gradient), and with senderBusy its last message out.
      bool arrived = true;
      if (op.forward ? k > 0 : k < chunks - 1) arrived = waitFor(op.forward ? fArrive[at - m] : bArrive[at + m]);
      if (arrived && sending[s].sent()) arrived = waitFor(sending[s]);
      if (arrived && ready < bestReady) best = s, bestReady = ready;
    }
    const double linksNext = net.nextEvent();
    if (best < 0 || linksNext < bestReady) {
      DTRAIN_CHECK(linksNext < std::numeric_limits<double>::infinity(), "pipeline simulation: the schedule deadlocks");
      net.advance(linksNext);
      continue;
    }
    net.advance(bestReady);
    const int s = best;
    const pl::PipeOp& op = ops[s][next[s]];
    const std::vector<double>& comm = op.forward ? cores.forwardCommS : cores.backwardCommS;
    const double commS = comm.empty() ? 0 : comm[s];
    double computeS = (op.forward ? fwd[s] : bwd[s]) - commS;
    if (cores.slots > 0) {
      int busy = 1;
      for (int o = 0; o < p; ++o)
        if (o != s && computeFrom[o] <= bestReady && bestReady < computeTo[o]) ++busy;
      // The scheduler keeps the runnable ranks even over the cores, the
      // computing ones apart: with fewer computing than cores, each shares
      // its core with the waiting ranks that fall to it.
      const double ranks = (busy + cores.waiting * (p - busy)) * cores.copies;
      const double all = static_cast<double>(p) * cores.copies;
      double share = std::max(1.0, ranks / cores.slots);
      if (all > cores.slots) share = std::max(share, 1 + cores.waiting * (all / cores.slots - 1));
      computeS *= oversubscribedShare(share, cores.slowdown);
    }
    computeFrom[s] = opStart[s] = bestReady;
    computeTo[s] = bestReady + computeS;
    run.computeS[s] += computeS;
    const std::vector<double>& sums = op.forward ? links.forwardSumS : links.backwardSumS;
    if (shared && !sums.empty() && sums[s] > 0) {
      // The sums cross the stage's host link out and in after the compute.
      const double saving = (op.forward ? links.forwardSumSaving : links.backwardSumSaving)[s];
      const int h = links.host[s];
      summing[s] = net.send(p * p + s, outLink(h), inLink(h), bestReady + computeS, sums[s], saving);
    } else {
      complete(s, bestReady + computeS + commS);
    }
  }
  // The messages still travelling.
  for (double t = net.nextEvent(); t < std::numeric_limits<double>::infinity(); t = net.nextEvent()) net.advance(t);
  for (int s = 0; s < p; ++s) {
    run.makespan = std::max(run.makespan, free[s]);
    if (sending[s].sent()) run.makespan = std::max(run.makespan, sending[s].when(net));
  }
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
