#include "core/ThreadPool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#include "core/Error.h"

namespace dtrain {
namespace {

thread_local bool tInParallelRegion = false;

struct ParallelRegion {
  bool saved = tInParallelRegion;
  ParallelRegion() { tInParallelRegion = true; }
  ~ParallelRegion() { tInParallelRegion = saved; }
};

// One parallel loop at a time: when ranks that are threads of one process call
// parallelFor at once, the first runs on the team and the others inline.
std::mutex gBusy;
std::atomic<int> gThreads{1};

}  // namespace

void setNumThreads(int n) {
  DTRAIN_CHECK_USAGE(n >= 1, "--threads must be >= 1 (got ", n, ")");
  gThreads = n;
}

int numThreads() { return gThreads.load(); }

bool inParallelRegion() { return tInParallelRegion; }

// The loop runs on the calling thread's OpenMP team, the same threads oneDNN's
// products run on: one set of threads for every kernel, so the team's idle
// threads (spinning GOMP_SPINCOUNT iterations after a product) are the ones
// that take the next loop, instead of competing for the cores with a second
// pool of dtrain's own.
void parallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = gThreads.load(std::memory_order_relaxed);
  if (threads <= 1 || n <= grain || tInParallelRegion) {
    fn(begin, end);
    return;
  }
  std::unique_lock<std::mutex> busy(gBusy, std::try_to_lock);
  if (!busy.owns_lock()) {
    fn(begin, end);
    return;
  }
  const int parts = static_cast<int>(std::min<int64_t>(threads, (n + grain - 1) / grain));
  const int64_t chunk = (n + parts - 1) / parts;
  std::exception_ptr error;
  std::mutex errorMutex;
#pragma omp parallel num_threads(parts)
  {
    ParallelRegion region;
    // The team may be smaller than asked (OMP_DYNAMIC, OMP_THREAD_LIMIT, an
    // inactive region): its threads then take the parts in turn.
    for (int p = omp_get_thread_num(); p < parts; p += omp_get_num_threads()) {
      const int64_t lo = begin + p * chunk, hi = std::min(end, lo + chunk);
      if (lo >= hi) continue;
      try {
        fn(lo, hi);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace dtrain
