#pragma once
// The slow rank. Data parallelism hides one: every rank's step takes as long as
// the slowest's, since all wait for it at the gradient synchronisation. So each
// rank measures, per step, its work until it arrives there (data, forward,
// backward) apart from the rest of its step; at the logged steps the ranks
// exchange their window's medians, and one that arrives > 20% of a step (and
// > 1 ms) later than the median of the others in two windows running is named
// once on stderr, by itself, with its host. The result line's "straggler" names the slowest rank
// over the whole run (its first window, the ranks' start-up, left out) when it
// is that late there and in at least half of the windows, else null.
//
// Needs a reduceMetric that is a mean over every rank (the lockstep data-parallel
// strategies: allreduce, ZeRO); checked once at the first logged step, and off
// where it is not so (parameter servers, pipelines, Hogwild!: no field).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/Timer.h"

namespace dtrain::parallel {
class Strategy;
}

namespace dtrain::runtime {

class StragglerWatch {
 public:
  static constexpr double kLateShare = 0.2;  // of a step: later than this is a straggler
  // ... and by at least this much: on steps of a millisecond the OS's scheduling
  // alone makes one thread a few tenths of one later than another.
  static constexpr double kMinExcessS = 1e-3;

  explicit StragglerWatch(parallel::Strategy& strategy);
  void beginStep() { stepStart_ = nowMicros(); }
  void arrived() { arrivedAt_ = nowMicros(); }  // at the gradient synchronisation
  void synced();                                 // it has completed
  // At a logged step, on every rank (collective): compares the window's ranks.
  void atLog(int64_t step);
  // {rank, host, excess_s, share_of_step} of the whole run, null when no rank is
  // late; discarded (not measured) for strategies it does not watch.
  nlohmann::json result() const;
  bool watching() const { return state_ != State::Off; }
  // The last window's per-rank medians over its steps, for the metrics record (empty before the
  // first logged step or when not watching): work until the synchronisation, and
  // the wait there, in ms per step.
  const std::vector<double>& rankWorkMs() const { return rankWorkMs_; }
  const std::vector<double>& rankWaitMs() const { return rankWaitMs_; }

 private:
  enum class State { Unchecked, On, Off };
  struct Late {
    int rank = -1;
    double excessS = 0, shareOfStep = 0;
  };
  // Every rank's `mine` (worldSize reductions of a one-hot value; 2 x worldSize
  // per logged step, --log-every 100 by default).
  std::vector<double> gather(double mine);
  Late slowest(const std::vector<double>& workS, const std::vector<double>& stepS) const;
  static bool tooLate(const Late& l) { return l.shareOfStep > kLateShare && l.excessS > kMinExcessS; }

  parallel::Strategy& strategy_;
  State state_ = State::Unchecked;
  double stepStart_ = 0, arrivedAt_ = 0, lastSyncedAt_ = 0;
  // Every rank's work and step seconds summed over windows, and their steps.
  struct Sums {
    std::vector<double> work, step;
    int64_t steps = 0;
    void add(const std::vector<double>& workS, const std::vector<double>& stepS, int64_t n);
  };
  std::vector<double> windowWorkUs_, windowStepUs_;  // this rank's, per step of the window
  Sums first_, rest_;  // the first logged window, and the others
  int windows_ = 0, lateRun_ = 0, lastLateRank_ = -1;
  std::vector<int> lateWindowsOf_;  // per rank: windows after the first in which it was late
  int firstLateRank_ = -1;          // late in the first window (what a one-window run has)
  bool reported_ = false;
  std::vector<double> rankWorkMs_, rankWaitMs_;
};

// This machine's name (gethostname).
std::string thisHost();

}  // namespace dtrain::runtime
