#pragma once
// Helpers shared by the CPU kernels (internal; not part of the kernel API).
#include <cstdint>
#include <utility>

#include "core/ThreadPool.h"

namespace dtrain::kernels::detail {

// Elements below which an elementwise loop never leaves the calling thread:
// waking the pool costs more than streaming this much memory.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

// Runs fn(lo, hi) over [0, n). With one thread (the benchmarked case) or a small
// n it calls fn directly, so no std::function is built on the hot path.
template <typename F>
inline void forRange(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (n <= grain || numThreads() <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  parallelFor(0, n, grain, [&](int64_t lo, int64_t hi) { fn(lo, hi); });
}

}  // namespace dtrain::kernels::detail
