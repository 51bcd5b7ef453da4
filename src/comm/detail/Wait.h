#pragma once
// Waiting without hanging: spin briefly (latency of a few hundred ns when the peer
// is running on another core), then yield (the machine may run more ranks than
// cores), then sleep on a condition variable with a short period so that a missed
// wake-up costs at most one period. Every wait has a deadline and a check hook
// (which throws when the communicator was aborted).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <algorithm>
#include <thread>

#include "core/Resumed.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dtrain::comm::detail {

using Clock = std::chrono::steady_clock;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Wakes sleeping waiters. notify() is cheap when nobody sleeps (one atomic load).
class Notifier {
 public:
  void notify() {
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      cv_.notify_all();
    }
  }

  // Sleeps until ready() or for at most `period`. Returns ready().
  template <typename Ready>
  bool sleepFor(Ready&& ready, std::chrono::microseconds period) {
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    bool ok = ready() || (cv_.wait_for(lock, period), ready());
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    return ok;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

// Waits until ready() is true; returns false when `deadline` passes first.
// check() is called between sleeps and may throw (abort). With a null notifier
// the sleep phase polls (used where completion must be driven, e.g. MPI_Test).
// How long to spin before yielding: while every rank of this machine can have a
// core, spinning is the fastest hand-off (tens of ns); with more ranks than
// cores the peer we wait for may need our core, so yield almost at once.
inline std::chrono::microseconds spinTime(int ranksOnMachine) {
  static const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return ranksOnMachine <= cores ? std::chrono::microseconds(50) : std::chrono::microseconds(0);
}

// A wait reaching its deadline after its process was stopped and continued
// (core/Resumed.h; `continues` made when the wait began) gets its whole length
// again: the deadline moves to now + `length`.
inline bool continuedSince(resumed::Tracker& continues, Clock::time_point& deadline, Clock::duration length) {
  if (!continues.continued()) return false;
  deadline = Clock::now() + length;
  return true;
}

template <typename Ready, typename Check>
bool waitUntil(Ready&& ready, Clock::time_point deadline, Check&& check,
               Notifier* notifier = nullptr,
               std::chrono::microseconds spin = std::chrono::microseconds(0)) {
  for (int i = 0; i < 128; ++i) {
    if (ready()) return true;
    cpuRelax();
  }
  if (spin.count() > 0) {
    const auto until = Clock::now() + spin;
    for (uint32_t i = 1;; ++i) {
      if (ready()) return true;
      cpuRelax();
      if ((i & 255) == 0 && Clock::now() >= until) break;
    }
  }
  check();
  const auto start = Clock::now();
  const auto length = deadline - start;
  resumed::Tracker continues;
  for (uint32_t i = 1;; ++i) {
    if (ready()) return true;
    std::this_thread::yield();
    if ((i & 63) == 0) {
      check();
      auto now = Clock::now();
      if (now >= deadline && !continuedSince(continues, deadline, length)) return ready();
      if (now - start > std::chrono::milliseconds(5)) break;  // a long wait: sleep
    }
  }
  auto period = std::chrono::microseconds(50);
  for (;;) {
    check();
    if (Clock::now() >= deadline && !continuedSince(continues, deadline, length)) return ready();
    if (notifier) {
      if (notifier->sleepFor(ready, std::chrono::microseconds(1000))) return true;
    } else {
      if (ready()) return true;
      std::this_thread::sleep_for(period);
      if (period < std::chrono::microseconds(200)) period *= 2;
    }
  }
}

inline Clock::time_point deadlineAfter(std::chrono::milliseconds timeout) {
  return Clock::now() + timeout;
}

}  // namespace dtrain::comm::detail
