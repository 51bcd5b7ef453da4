#pragma once
// A discrete-event run of one pipeline step: every stage runs its operations
// in the order dtrain's schedule gives it (parallel/pipeline/PipelineSchedule.h); a
// forward waits for the previous chunk's output, a backward for the next
// chunk's gradient, each a point-to-point message. Messages between stages on
// different hosts share the sending host's link out and the receiving host's
// link in with the others in flight (plan/SharedLinks.h: a middle stage's
// activations forward and gradients back share its one link); with
// senderBusy the sender also waits for its message to arrive before its next
// operation. The makespan gives the bubble
// ((p - 1) / m of the compute for GPipe and 1F1B, (p - 1) / (v m) interleaved,
// with equal stages) and the predicted timeline's spans.
#include <string>
#include <vector>

namespace dtrain::plan {

struct PipelineOpSpan {
  int stage = 0;
  bool forward = true;
  int micro = 0, chunk = 0;
  double start = 0, end = 0;  // seconds
};

struct PipelineRun {
  double makespan = 0;
  std::vector<PipelineOpSpan> ops;
  std::vector<double> computeS;  // per stage: its operations' compute, as run (shared cores slow it)
};

// Ranks that share cores (emulated hosts on one machine): an operation's
// compute is slowed by the ranks computing when it starts, copies (the
// stage's dp x tp ranks, which run the same schedule) for each stage busy
// then, and by the waiting ones at their weight, over `slots` ranks the
// cores run at full speed (0: none shared).
// forwardCommS/backwardCommS: the part of forwardS/backwardS that is not
// compute (tensor-parallel sums), not slowed, and replaced by the links'
// sums where PipelineLinks has them (empty: none).
struct PipelineCores {
  double slots = 0;
  int copies = 1;
  double slowdown = 1;  // beyond the share where ranks outnumber the slots (plan::oversubscribedShare)
  // A stage's ranks not computing (waiting for a message, or done) weigh this
  // much on the cores against a computing one (plan::waitingWeight; 0: idle),
  // and where the ranks outnumber the slots a computing one shares its slot
  // with those that fall to it: a share of at least 1 + waiting (ranks / slots - 1).
  double waiting = 0;
  std::vector<double> forwardCommS, backwardCommS;
};

// The messages between the chunks: seconds[k], one micro-batch's activations
// from chunk k to chunk k + 1 (and its gradient back) on an idle link;
// host[s], stage s's host (empty: no link is shared, every message takes its
// seconds from when it is sent). An emulated link's token bucket (netsim's
// tbf): burstSaving[k], message k's size in seconds of line rate (at most
// the bucket's), what a full bucket takes off it; refillS, the bucket's size
// in seconds of line rate, refilled at line rate while the link idles. A
// message takes from the bucket what it holds and leaves it the rest (empty:
// no bucket).
struct PipelineLinks {
  std::vector<double> seconds;
  std::vector<int> host;
  std::vector<double> burstSaving;
  double refillS = 0;
  // Per stage, one operation's tensor-parallel sums where they cross the
  // stage's host link (its tp group spans hosts): their seconds on a drained
  // link and what a full bucket takes off them. They share the stage's
  // link out and in with its messages, after the operation's compute
  // (empty: the sums are the operations' PipelineCores comm parts, off the links).
  std::vector<double> forwardSumS, backwardSumS, forwardSumSaving, backwardSumSaving;
};

// forwardS[s], backwardS[s]: one micro-batch through one of stage s's chunks.
PipelineRun simulatePipeline(const std::string& schedule, int stages, int microBatches, int virtualStages,
                             const std::vector<double>& forwardS, const std::vector<double>& backwardS,
                             const PipelineLinks& links, bool keepSpans, bool senderBusy = false,
                             const PipelineCores& cores = {});
// Every message p2pS, no shared links.
PipelineRun simulatePipeline(const std::string& schedule, int stages, int microBatches, int virtualStages,
                             const std::vector<double>& forwardS, const std::vector<double>& backwardS,
                             double p2pS, bool keepSpans, bool senderBusy = false, const PipelineCores& cores = {});

}  // namespace dtrain::plan
