#pragma once
// A discrete-event run of one pipeline step: every stage runs its operations
// in the order dtrain's schedule gives it (parallel/pipeline/Schedule.h); a
// forward waits for the previous chunk's, a backward for the next chunk's,
// plus the point-to-point message between them (with senderBusy, which also
// keeps its sender busy: no overlap of a send with the next operation). The makespan gives the bubble
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
};

// forwardS[s], backwardS[s]: one micro-batch through one of stage s's chunks.
PipelineRun simulatePipeline(const std::string& schedule, int stages, int microBatches, int virtualStages,
                             const std::vector<double>& forwardS, const std::vector<double>& backwardS,
                             double p2pS, bool keepSpans, bool senderBusy = false);

// The most (micro-batch, chunk) pairs stage `stage` holds activations of.
int pipelineInFlight(const std::string& schedule, int stage, int stages, int microBatches, int virtualStages);

}  // namespace dtrain::plan
