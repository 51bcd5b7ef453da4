#include "parallel/pipeline/PipelineSchedule.h"

#include <algorithm>

#include "core/Error.h"
#include "core/NameRegistry.h"

namespace dtrain::parallel::pipeline {

ScheduleKind scheduleFromName(const std::string& name) {
  static const NameRegistry<ScheduleKind> kinds(
      "--pipeline-schedule", {{"gpipe", ScheduleKind::GPipe}, {"1f1b", ScheduleKind::OneFOneB}});
  return kinds.find(name);
}

const char* scheduleName(ScheduleKind kind) {
  return kind == ScheduleKind::GPipe ? "gpipe" : "1f1b";
}

namespace {

// Megatron's interleaved 1F1B (schedules.py, forward_backward_pipelining_with_
// interleaving): virtual micro-step k of the stage's M*v runs micro-batch
// (k / Pv) * P + k % P of chunk (k % Pv) / P, in reverse chunk order for the
// backwards.
std::vector<PipeOp> interleavedOps(int stage, int p, int m, int v) {
  const int total = m * v;
  const int warmup = m == p ? total : std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  auto op = [&](int k, bool forward) {
    const int inGroup = k % (p * v);
    const int chunk = inGroup / p;
    return PipeOp{forward, (k / (p * v)) * p + k % p, forward ? chunk : v - 1 - chunk};
  };
  std::vector<PipeOp> ops;
  for (int k = 0; k < warmup; ++k) ops.push_back(op(k, true));
  for (int k = warmup; k < total; ++k) {  // steady state: one forward, one backward
    ops.push_back(op(k, true));
    ops.push_back(op(k - warmup, false));
  }
  for (int k = total - warmup; k < total; ++k) ops.push_back(op(k, false));  // drain
  return ops;
}

}  // namespace

std::vector<PipeOp> stageOps(ScheduleKind kind, int stage, int stages, int m, int v) {
  DTRAIN_CHECK(stage >= 0 && stage < stages && m >= 1 && v >= 1, "stageOps: stage ", stage, " of ",
               stages, ", ", m, " micro-batches, ", v, " virtual stages");
  if (v > 1) {
    DTRAIN_CHECK_USAGE(kind == ScheduleKind::OneFOneB,
                       "--virtual-stages interleaves the 1f1b schedule (not ", scheduleName(kind), ")");
    DTRAIN_CHECK_USAGE(m % stages == 0, "--virtual-stages needs --micro-batches a multiple of "
                       "--pipeline-stages (", m, " micro-batches, ", stages, " stages)");
    return interleavedOps(stage, stages, m, v);
  }
  std::vector<PipeOp> ops;
  const int warmup = kind == ScheduleKind::GPipe ? m : std::min(stages - 1 - stage, m);
  for (int i = 0; i < warmup; ++i) ops.push_back({true, i});
  for (int i = warmup; i < m; ++i) {  // steady state: one forward, one backward
    ops.push_back({true, i});
    ops.push_back({false, i - warmup});
  }
  for (int i = m - warmup; i < m; ++i) ops.push_back({false, i});  // drain
  return ops;
}

int peakInFlight(const std::vector<PipeOp>& ops) {
  int now = 0, peak = 0;
  for (const PipeOp& op : ops) {
    now += op.forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

}  // namespace dtrain::parallel::pipeline
