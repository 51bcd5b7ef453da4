#pragma once
// Contention for timing-sensitive tests: while a CpuHog lives, one busy thread
// per core competes with the code under test, so a test that passes under it
// cannot be tripped by a loaded CI machine (ctest -j2 on 2 cores is lighter).
#include <atomic>
#include <thread>
#include <vector>

namespace dtrain::test {

class CpuHog {
 public:
  explicit CpuHog(unsigned threads = std::max(1u, std::thread::hardware_concurrency())) {
    for (unsigned i = 0; i < threads; ++i)
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
      });
  }
  ~CpuHog() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  CpuHog(const CpuHog&) = delete;
  CpuHog& operator=(const CpuHog&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace dtrain::test
