#pragma once
// The order in which one pipeline stage runs the forwards (F) and backwards
// (B) of a step's M micro-batches:
//   gpipe  all M forwards, then all M backwards (Huang et al. 2019): every
//          stage holds the activations of M micro-batches at once.
//   1f1b   PipeDream-flush (Narayanan et al. 2021; Megatron's non-interleaved
//          schedule): stage s of P runs min(P-1-s, M) warm-up forwards, then
//          alternates one forward and one backward, then drains the backwards;
//          it holds at most P-s micro-batches in flight, and flushes at the
//          end of the step, so its gradients are GPipe's (synchronous).
// Both run backwards in micro-batch order, so the last backward is M-1's on
// every stage (where data parallelism launches its allreduce).
#include <string>
#include <vector>

namespace dtrain::parallel::pipeline {

enum class ScheduleKind { GPipe, OneFOneB };
// Throws UsageError on an unknown name ("gpipe", "1f1b").
ScheduleKind scheduleFromName(const std::string& name);
const char* scheduleName(ScheduleKind kind);

struct PipeOp {
  bool forward;  // false: backward
  int micro;     // micro-batch index
};

std::vector<PipeOp> stageOps(ScheduleKind kind, int stage, int stages, int microBatches);

// The most micro-batches whose activations `ops` hold at once.
int peakInFlight(const std::vector<PipeOp>& ops);

}  // namespace dtrain::parallel::pipeline
