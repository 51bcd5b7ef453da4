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
//   1f1b with v virtual stages (--virtual-stages v; Narayanan et al. 2021,
//          Megatron's interleaved schedule): the model is cut into P*v chunks
//          and stage s holds chunks s, s+P, ..., s+(v-1)P; the stage runs its
//          chunks' forwards (and backwards) P micro-batches at a time, chunk
//          by chunk, after (P-1-s)*2 + (v-1)*P warm-up forwards. The bubble
//          shrinks v-fold, to (P-1)/(vM+P-1) of the step, for v times the
//          point-to-point messages. M must be a multiple of P.
// Every chunk runs its backwards in micro-batch order, so each chunk's last
// backward is M-1's (where data parallelism launches its allreduce).
#include <string>
#include <vector>

namespace dtrain::parallel::pipeline {

enum class ScheduleKind { GPipe, OneFOneB };
// Throws UsageError on an unknown name ("gpipe", "1f1b").
ScheduleKind scheduleFromName(const std::string& name);
const char* scheduleName(ScheduleKind kind);

struct PipeOp {
  bool forward;   // false: backward
  int micro;      // micro-batch index
  int chunk = 0;  // which of the stage's v chunks (model chunk chunk*P + stage)
};

// Throws UsageError where `virtualStages` > 1 does not fit (gpipe, M not a multiple of P).
std::vector<PipeOp> stageOps(ScheduleKind kind, int stage, int stages, int microBatches,
                             int virtualStages = 1);

// The most (micro-batch, chunk) pairs whose activations `ops` hold at once.
int peakInFlight(const std::vector<PipeOp>& ops);

}  // namespace dtrain::parallel::pipeline
