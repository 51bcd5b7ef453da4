#pragma once
// Time a stopped process did not run. A job stopped with SIGSTOP or Ctrl-Z, or
// suspended by a batch system (SLURM's `scontrol suspend` sends SIGSTOP to
// every process of it), sees the wall clock jump when it continues: every
// wait in progress then finds its deadline long past and would fail with a
// timeout, although no peer was slow (they were all stopped too). SIGCONT
// marks each continuation; waits that saw one get their time again.
#include <atomic>
#include <cstdint>

namespace dtrain::resumed {

// How many times this process has continued after a stop (SIGCONT), since
// the first call (which installs the handler, where SIGCONT still has its
// default action: a program's own handler is left alone).
uint64_t count();

// What one waiter or liveness record has seen of the continues: continued()
// is true once for every call that follows one or more new continues (of
// concurrent callers, one). A wait then moves its deadline, a heartbeat
// record counts its peers as heard.
class Tracker {
 public:
  Tracker() : seen_(count()) {}
  bool continued() {
    const uint64_t now = count();
    uint64_t seen = seen_.load(std::memory_order_relaxed);
    return now != seen && seen_.compare_exchange_strong(seen, now);
  }

 private:
  std::atomic<uint64_t> seen_;
};

}  // namespace dtrain::resumed
