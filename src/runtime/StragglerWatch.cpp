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

namespace {
// The median of a window's steps: a step the OS took a core away from, or one that
// evaluated, moves a mean; a rank that is slow at every step moves the median.
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}
}  // namespace

StragglerWatch::StragglerWatch(parallel::Strategy& strategy) : strategy_(strategy) {
  if (strategy.worldSize() < 2 || strategy.dataReplicas() != strategy.worldSize())
    state_ = State::Off;
}

void StragglerWatch::synced() {
  const double now = nowMicros();
  windowWorkUs_.push_back(arrivedAt_ - stepStart_);
  // The step as the whole cycle from one synchronisation to the next: a fast rank
  // also waits at the step's other collectives (the stop check, the loss sum), and
  // with overlap its wait for a rank slowed after backward falls there.
  windowStepUs_.push_back(now - (lastSyncedAt_ > 0 ? lastSyncedAt_ : stepStart_));
  lastSyncedAt_ = now;
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
  const std::vector<double> work = gather(median(windowWorkUs_) / 1e6);
  const std::vector<double> stepS = gather(median(windowStepUs_) / 1e6);
  const Late late = slowest(work, stepS);
  rankWorkMs_.assign(work.size(), 0);
  rankWaitMs_.assign(work.size(), 0);
  for (size_t r = 0; r < work.size(); ++r) {
    rankWorkMs_[r] = 1e3 * work[r];
    rankWaitMs_[r] = 1e3 * std::max(0.0, stepS[r] - work[r]);
  }
  // Named once it is late in two windows running; in the result, when it is late over
  // the run and in at least half of its windows (a moment's hiccup is no straggler).
  // The first window is the ranks' start-up (allocations, first touches), not their speed.
  ++windows_;
  const bool isLate = windows_ > 1 && tooLate(late);
  if (windows_ == 1 && tooLate(late)) firstLateRank_ = late.rank;
  lateWindowsOf_.resize(work.size());
  if (isLate) ++lateWindowsOf_[late.rank];
  lateRun_ = !isLate ? 0 : late.rank == lastLateRank_ ? lateRun_ + 1 : 1;
  lastLateRank_ = isLate ? late.rank : -1;
  if (lateRun_ >= 2 && !reported_ && late.rank == strategy_.rank())
    std::fprintf(stderr,
                 "dtrain: rank %d (%s) is the slow rank: it reaches the gradient synchronisation "
                 "%.3f s (%.0f%% of a step) after the median of the others, up to step %lld\n",
                 late.rank, thisHost().c_str(), late.excessS, 100 * late.shareOfStep,
                 static_cast<long long>(step));
  if (lateRun_ >= 2) reported_ = true;  // once, on every rank alike
  // The first window holds each rank's one-time start (allocations, first touches):
  // kept apart, and used only when the run had no other.
  Sums& sums = windows_ == 1 ? first_ : rest_;
  sums.add(work, stepS, static_cast<int64_t>(windowWorkUs_.size()));
  windowWorkUs_.clear();
  windowStepUs_.clear();
}

void StragglerWatch::Sums::add(const std::vector<double>& workS, const std::vector<double>& stepS,
                               int64_t n) {
  work.resize(workS.size());
  step.resize(workS.size());
  for (size_t r = 0; r < workS.size(); ++r) {
    work[r] += workS[r] * static_cast<double>(n);
    step[r] += stepS[r] * static_cast<double>(n);
  }
  steps += n;
}

nlohmann::json StragglerWatch::result() const {
  const Sums& sums = rest_.steps > 0 ? rest_ : first_;
  if (state_ != State::On || sums.steps == 0) return nullptr;
  const Late run = slowest(sums.work, sums.step);  // sums: the shares are those of the means
  const bool consistently = windows_ == 1 ? firstLateRank_ == run.rank
                                          : 2 * lateWindowsOf_[run.rank] >= windows_ - 1;
  if (!tooLate(run) || !consistently) return nullptr;
  // The host is this process's: the threads backend's ranks share it; under mpirun
  // the slow rank's own stderr line names its host.
  return {{"rank", run.rank},
          {"host", run.rank == strategy_.rank() || !strategy_.ownsProcess()
                       ? nlohmann::json(thisHost()) : nlohmann::json(nullptr)},
          {"excess_s", run.excessS / static_cast<double>(sums.steps)},  // per step
          {"share_of_step", run.shareOfStep}};
}

}  // namespace dtrain::runtime
