#pragma once
// The slow rank. Data parallelism hides one: every rank's step takes as long as
// the slowest's, since all wait for it at the gradient synchronisation. So each
// rank measures, per step, its work until it arrives there (data, forward,
// backward) apart from the time it then waits; at the logged steps the ranks
// exchange their work times, and one that arrives > 20% of a step later than the
// median of the others in two windows running is named once on stderr, by
// itself, with its host. The result line's "straggler" names the slowest rank
// over the whole run when it is that late, else null.
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

  parallel::Strategy& strategy_;
  State state_ = State::Unchecked;
  double stepStart_ = 0, arrivedAt_ = 0;
  double windowWorkUs_ = 0, windowStepUs_ = 0;
  std::vector<double> totalWorkS_, totalStepS_;  // every rank's, over the logged windows
  int64_t windowSteps_ = 0, totalSteps_ = 0;
  int lateWindows_ = 0;
  bool reported_ = false;
  Late run_;  // over the whole run, filled at the last logged step
};

// This machine's name (gethostname).
std::string thisHost();

}  // namespace dtrain::runtime
