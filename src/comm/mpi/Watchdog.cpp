#include "comm/mpi/Watchdog.h"

#include "comm/HangReport.h"
#include "comm/mpi/Liveness.h"
#include "core/Resumed.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

namespace dtrain::comm::mpi {

namespace {
using WatchClock = std::chrono::steady_clock;

struct OpenCall {
  std::string what, peers;
  WatchClock::time_point since;
  Millis timeout;
  std::vector<int> worldPeers;
};

// Grace beyond the timeout: a quarter of it, at least 2 s.
Millis graceFor(Millis timeout) { return std::max(Millis{2000}, timeout / 4); }

class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog* w = new Watchdog();  // never destroyed: the thread outlives main's statics
    return *w;
  }
  long open(OpenCall call) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();
    }
    open_[++next_] = std::move(call);
    return next_;
  }
  void close(long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.erase(id);
  }
  std::atomic<int64_t> timeoutMs{300000};

 private:
  void loop() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::unique_lock<std::mutex> lock(mutex_);
      const auto now = WatchClock::now();
      // The process was stopped and continued: the calls' time starts again.
      if (resumed_.continued())
        for (auto& [id, c] : open_) c.since = now;
      for (const auto& [id, c] : open_) {
        const auto silent = silentPeers(c.worldPeers, Millis{2000});
        const bool overdue = now - c.since > c.timeout + graceFor(c.timeout);
        if (silent.empty() && !overdue) continue;
        int rank = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - c.since).count();
        if (!silent.empty())
          std::fprintf(stderr, "dtrain: rank %d: %s waited %lld s: %s; aborting the job\n", rank,
                       c.what.c_str(), static_cast<long long>(waited), describeSilent(silent).c_str());
        else
          std::fprintf(stderr,
                       "dtrain: rank %d: %s waited %lld s for %s without progress (--call-timeout %.0f s): "
                       "a peer hangs; aborting the job\n",
                       rank, c.what.c_str(), static_cast<long long>(waited), c.peers.c_str(),
                       c.timeout.count() / 1000.0);
        std::fflush(stderr);
        lock.unlock();  // the report takes a few beats; calls close meanwhile
        flight::reportHang();
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
  }
  std::mutex mutex_;
  std::map<long, OpenCall> open_;
  long next_ = 0;
  bool started_ = false;
  resumed::Tracker resumed_;
};
}  // namespace

void setWatchdogTimeout(Millis timeout) { Watchdog::instance().timeoutMs = timeout.count(); }
Millis watchdogTimeout() { return Millis{Watchdog::instance().timeoutMs.load()}; }

BlockingScope::BlockingScope(std::string what, std::string peers, Millis timeout,
                             std::vector<int> worldPeers) {
  if (timeout.count() <= 0) timeout = watchdogTimeout();
  id_ = Watchdog::instance().open(
      {std::move(what), std::move(peers), WatchClock::now(), timeout, std::move(worldPeers)});
}

BlockingScope::~BlockingScope() { Watchdog::instance().close(id_); }

}  // namespace dtrain::comm::mpi
