#include "plan/PipelineSim.h"

#include <algorithm>
#include <map>

#include "core/Error.h"
#include "parallel/pipeline/Schedule.h"

namespace dtrain::plan {

namespace pl = parallel::pipeline;

PipelineRun simulatePipeline(const std::string& schedule, int p, int m, int v,
                             const std::vector<double>& fwd, const std::vector<double>& bwd, double p2p,
                             bool keepSpans, bool senderBusy) {
  const pl::ScheduleKind kind = pl::scheduleFromName(schedule);
  std::vector<std::vector<pl::PipeOp>> ops(p);
  for (int s = 0; s < p; ++s) ops[s] = pl::stageOps(kind, s, p, m, v);
  const int chunks = p * v;
  // End times of each (virtual stage k, micro-batch) forward and backward; -1: not yet.
  std::vector<double> fEnd(static_cast<size_t>(chunks) * m, -1), bEnd(static_cast<size_t>(chunks) * m, -1);
  std::vector<size_t> next(p, 0);
  std::vector<double> free(p, 0);
  PipelineRun run;
  size_t remaining = 0;
  for (const auto& o : ops) remaining += o.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < ops[s].size()) {
        const pl::PipeOp& op = ops[s][next[s]];
        const int k = op.chunk * p + s;
        const size_t at = static_cast<size_t>(k) * m + op.micro;
        double ready = free[s];
        if (op.forward) {
          if (k > 0) {
            const double dep = fEnd[at - m];
            if (dep < 0) break;
            ready = std::max(ready, dep + p2p);
          }
        } else {
          if (fEnd[at] < 0) break;
          if (k < chunks - 1) {
            const double dep = bEnd[at + m];
            if (dep < 0) break;
            ready = std::max(ready, dep + p2p);
          }
        }
        const double end = ready + (op.forward ? fwd[s] : bwd[s]);
        (op.forward ? fEnd : bEnd)[at] = end;
        // senderBusy: the sender is busy while its message goes out (MPI
        // progresses a large isend only inside MPI calls: Open MPI's TCP
        // transport has no progress thread). Measured (mlp, 4 emulated hosts
        // at 100 Mbit/s): GPipe and 1F1B take the same time, which free sends
        // would put 57% apart.
        const bool sends = op.forward ? k < chunks - 1 : k > 0;
        free[s] = end + (senderBusy && sends ? p2p : 0);
        if (keepSpans) run.ops.push_back({s, op.forward, op.micro, op.chunk, ready, end});
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    DTRAIN_CHECK(progressed, "pipeline simulation: the schedule deadlocks");
  }
  for (double f : free) run.makespan = std::max(run.makespan, f);
  return run;
}

int pipelineInFlight(const std::string& schedule, int stage, int p, int m, int v) {
  return pl::peakInFlight(pl::stageOps(pl::scheduleFromName(schedule), stage, p, m, v));
}

}  // namespace dtrain::plan
