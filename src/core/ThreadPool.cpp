#include "core/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/Error.h"

namespace dtrain {
namespace {

thread_local bool tInParallelRegion = false;

struct ParallelRegion {
  bool saved = tInParallelRegion;
  ParallelRegion() { tInParallelRegion = true; }
  ~ParallelRegion() { tInParallelRegion = saved; }
};

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { loop(i + 1); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs job(part) for part in [0, parts) across the caller and the workers.
  bool tryRun(int parts, const std::function<void(int)>& job) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      parts_ = parts;
      next_.store(0);
      pending_ = static_cast<int>(threads_.size());
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void work() {
    ParallelRegion region;
    for (int p; (p = next_.fetch_add(1)) < parts_;) {
      try {
        (*job_)(p);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }
  void loop(int) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
      }
      work();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex busy_, mutex_;
  std::condition_variable cv_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int parts_ = 0;
  std::atomic<int> next_{0};
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

std::mutex gConfigMutex;
std::shared_ptr<Pool> gPool;
std::atomic<int> gThreads{1};

}  // namespace

void setNumThreads(int n) {
  DTRAIN_CHECK_USAGE(n >= 1, "--threads must be >= 1 (got ", n, ")");
  std::lock_guard<std::mutex> lock(gConfigMutex);
  if (n == gThreads.load() && (n == 1 || gPool)) return;
  gPool.reset();
  if (n > 1) gPool = std::make_shared<Pool>(n - 1);
  gThreads = n;
}

int numThreads() { return gThreads.load(); }

bool inParallelRegion() { return tInParallelRegion; }

void parallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = gThreads.load(std::memory_order_relaxed);
  if (threads <= 1 || n <= grain) {
    fn(begin, end);
    return;
  }
  std::shared_ptr<Pool> pool;
  {
    std::lock_guard<std::mutex> lock(gConfigMutex);
    pool = gPool;
  }
  if (!pool) {
    fn(begin, end);
    return;
  }
  const int parts = static_cast<int>(std::min<int64_t>(pool->size(), (n + grain - 1) / grain));
  const int64_t chunk = (n + parts - 1) / parts;
  std::function<void(int)> job = [&](int p) {
    int64_t lo = begin + p * chunk, hi = std::min(end, lo + chunk);
    if (lo < hi) fn(lo, hi);
  };
  if (!pool->tryRun(parts, job)) fn(begin, end);
}

}  // namespace dtrain
