#pragma once
// Liveness of parameter-server peers, independent of training progress.
//
// Every rank of a parameter-server job runs one Heartbeat: a thread of its own,
// on a communicator of its own (a split of the job's, so it never shares a
// communicator with the training thread), that sends a small beat to each peer
// every interval and records when it last heard from each. Servers beat to
// every worker, workers to every server. A long forward pass, a page-fault
// storm or a starved core delays training messages, not beats: the rule of the
// job is that a peer is dead after --ps-timeout seconds without any message
// or beat from it (PsOptions::timeoutS; beats every timeoutS/10, at most 1 s).
//
// A beat carries notices from sender to receiver: a server tells a worker it
// declared it dead (so that a worker that was only stopped, e.g. SIGSTOP or a
// partition, learns it must refresh its parameters) and, with its last beats,
// that the run is over (so that a worker declared dead stops instead of
// waiting for servers that have gone).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/Communicator.h"
#include "core/Resumed.h"

namespace dtrain::parallel::ps {

// Notice bits of a beat.
inline constexpr int64_t kNoticeDeclaredDead = 1;  // server -> worker: you were declared dead
inline constexpr int64_t kNoticeRunOver = 2;       // server -> worker: the run is over

class Heartbeat {
 public:
  // `comm` is used by this object's thread only; `peers` are ranks of it.
  Heartbeat(std::unique_ptr<comm::Communicator> comm, std::vector<int> peers, double timeoutS);
  ~Heartbeat();  // stops the thread
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  static double intervalFor(double timeoutS);

  // Seconds since the last beat from peers[i] (since start before the first).
  double silentFor(int i) const;
  // The notice bits peers[i] sent with its latest beats.
  int64_t noticesFrom(int i) const { return received_[i].load(std::memory_order_acquire); }
  // Every notice bit peers[i] sent since the last call (a notice that was
  // withdrawn before the training thread looked is not missed).
  int64_t takeNotices(int i) { return latched_[i].exchange(0, std::memory_order_acq_rel); }
  // Notice bits sent to peers[i] from now on.
  void setNotice(int i, int64_t bits) { sent_[i].store(bits, std::memory_order_release); }
  // Fault injection: stop (false) or resume (true) sending beats; receiving goes on.
  void setSending(bool on) { sending_.store(on, std::memory_order_release); }
  // Blocks until `pred()` holds (checked after every received beat and every
  // interval) or `limit` passes; returns whether it holds.
  template <class Pred>
  bool waitUntil(Pred pred, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, limit, pred);
  }
  // Sends one last round of beats (with the notices set now) and stops.
  void stop();

 private:
  void loop();
  void beat(int i);
  void post(int i);

  std::unique_ptr<comm::Communicator> comm_;
  std::vector<int> peers_;
  std::chrono::microseconds interval_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<std::atomic<int64_t>[]> lastNs_;    // since start_, per peer
  std::unique_ptr<std::atomic<int64_t>[]> received_;  // notices from each peer
  std::unique_ptr<std::atomic<int64_t>[]> sent_;      // notices to each peer
  std::unique_ptr<std::atomic<int64_t>[]> latched_;   // notices received, not yet taken
  std::vector<int64_t> inBuf_, outBuf_;               // one word per peer
  std::vector<comm::WorkPtr> inWork_, outWork_;
  std::atomic<bool> sending_{true};
  mutable resumed::Tracker resumed_;  // continues already forgiven (silentFor)
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dtrain::parallel::ps
