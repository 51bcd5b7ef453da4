#include "runtime/StragglerWatch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "parallel/Strategy.h"

namespace dtrain::runtime {

std::string thisHost() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

StragglerWatch::StragglerWatch(parallel::Strategy& strategy) : strategy_(strategy) {
  if (strategy.worldSize() < 2 || strategy.dataReplicas() != strategy.worldSize())
    state_ = State::Off;
}

void StragglerWatch::synced() {
  const double now = nowMicros();
  windowWorkUs_ += arrivedAt_ - stepStart_;
  windowStepUs_ += now - stepStart_;
  ++windowSteps_;
}

std::vector<double> StragglerWatch::gather(double mine) {
  const int n = strategy_.worldSize();
  std::vector<double> out(n);
  for (int r = 0; r < n; ++r) out[r] = strategy_.reduceMetric(r == strategy_.rank() ? mine : 0.0) * n;
  return out;
}

StragglerWatch::Late StragglerWatch::slowest(const std::vector<double>& workS,
                                             const std::vector<double>& stepS) const {
  Late late;
  late.rank = static_cast<int>(std::max_element(workS.begin(), workS.end()) - workS.begin());
  std::vector<double> others;
  for (size_t r = 0; r < workS.size(); ++r)
    if (static_cast<int>(r) != late.rank) others.push_back(workS[r]);
  std::nth_element(others.begin(), others.begin() + others.size() / 2, others.end());
  late.excessS = workS[late.rank] - others[others.size() / 2];
  const double step = stepS[late.rank];
  late.shareOfStep = step > 0 ? late.excessS / step : 0;
  return late;
}

void StragglerWatch::atLog(int64_t step) {
  if (state_ == State::Off) return;
  if (state_ == State::Unchecked) {
    // A mean over every rank gives each rank's one-hot 1 back as 1.
    const std::vector<double> present = gather(1.0);
    const bool all = std::all_of(present.begin(), present.end(),
                                 [](double v) { return v > 0.999 && v < 1.001; });
    state_ = all ? State::On : State::Off;
    if (!all) return;
  }
  const double steps = static_cast<double>(std::max<int64_t>(1, windowSteps_));
  const std::vector<double> work = gather(windowWorkUs_ / steps / 1e6);
  const std::vector<double> stepS = gather(windowStepUs_ / steps / 1e6);
  const Late late = slowest(work, stepS);
  totalSteps_ += windowSteps_;
  lateWindows_ = late.shareOfStep > kLateShare ? lateWindows_ + 1 : 0;
  if (lateWindows_ >= 2 && !reported_ && late.rank == strategy_.rank())
    std::fprintf(stderr,
                 "dtrain: rank %d (%s) is the slow rank: it reaches the gradient synchronisation "
                 "%.3f s (%.0f%% of a step) after the median of the others, up to step %lld\n",
                 late.rank, thisHost().c_str(), late.excessS, 100 * late.shareOfStep,
                 static_cast<long long>(step));
  if (lateWindows_ >= 2) reported_ = true;  // once, on every rank alike
  // The whole run's sums per rank, from the windows' means (every rank steps alike).
  totalWorkS_.resize(work.size());
  totalStepS_.resize(work.size());
  for (size_t r = 0; r < work.size(); ++r) {
    totalWorkS_[r] += work[r] * steps;
    totalStepS_[r] += stepS[r] * steps;
  }
  run_ = slowest(totalWorkS_, totalStepS_);  // sums: the shares are those of the means
  windowWorkUs_ = windowStepUs_ = 0;
  windowSteps_ = 0;
}

nlohmann::json StragglerWatch::result() const {
  if (state_ != State::On || run_.shareOfStep <= kLateShare) return nullptr;
  // The host is this process's: the threads backend's ranks share it; under mpirun
  // the slow rank's own stderr line names its host.
  const double steps = static_cast<double>(std::max<int64_t>(1, totalSteps_));
  return {{"rank", run_.rank},
          {"host", run_.rank == strategy_.rank() || strategy_.ownsProcess() == false
                       ? nlohmann::json(thisHost()) : nlohmann::json(nullptr)},
          {"excess_s", run_.excessS / steps},  // per step
          {"share_of_step", run_.shareOfStep}};
}

}  // namespace dtrain::runtime
