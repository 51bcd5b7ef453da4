#pragma once
#include <chrono>

namespace dtrain {

// Monotonic wall-clock stopwatch.
class Timer {
 public:
  Timer() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

// Microseconds since an arbitrary process-wide origin (for timelines).
double nowMicros();

// Seconds since the Unix epoch on the system clock: a time several processes
// agree on (a shared start, a log's timestamps).
double epochSeconds();

}  // namespace dtrain
