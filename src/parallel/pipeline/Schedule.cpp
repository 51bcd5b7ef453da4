#include "parallel/pipeline/Schedule.h"

#include <algorithm>

#include "core/Error.h"

namespace dtrain::parallel::pipeline {

ScheduleKind scheduleFromName(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::GPipe;
  if (name == "1f1b") return ScheduleKind::OneFOneB;
  throw UsageError("unknown pipeline schedule '" + name + "' (known: gpipe, 1f1b)");
}

const char* scheduleName(ScheduleKind kind) {
  return kind == ScheduleKind::GPipe ? "gpipe" : "1f1b";
}

std::vector<PipeOp> stageOps(ScheduleKind kind, int stage, int stages, int m) {
  DTRAIN_CHECK(stage >= 0 && stage < stages && m >= 1, "stageOps: stage ", stage, " of ", stages,
               ", ", m, " micro-batches");
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
