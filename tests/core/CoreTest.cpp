#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/Error.h"
#include "core/Memory.h"
#include "core/Rng.h"
#include "core/ThreadPool.h"

using namespace dtrain;

TEST(Error, CheckThrowsWithMessage) {
  try {
    DTRAIN_CHECK(1 + 1 == 3, "math is broken: ", 42);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "math is broken: 42");
  }
  EXPECT_THROW(DTRAIN_CHECK_USAGE(false, "bad flag"), UsageError);
}

TEST(Rng, DeterministicAndRestorable) {
  Rng a(7), b(7);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next(), b.next());
  auto st = a.state();
  float x = a.uniform();
  a.setState(st);
  EXPECT_EQ(a.uniform(), x);
  Rng c(8);
  EXPECT_NE(Rng(7).next(), c.next());
}

TEST(Rng, UniformAndNormalMoments) {
  Rng r(1);
  double s = 0, s2 = 0, n = 20000;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    s += r.normal();
  }
  EXPECT_NEAR(s / n, 0.0, 0.03);
  for (int i = 0; i < n; ++i) {
    double z = r.normal();
    s2 += z * z;
  }
  EXPECT_NEAR(s2 / n, 1.0, 0.05);
}

TEST(Memory, CountsCurrentAndPeak) {
  auto before = memory::stats();
  void* p = memory::allocate(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % memory::kAlignment, 0u);
  EXPECT_EQ(memory::stats().currentBytes, before.currentBytes + 1000);
  EXPECT_GE(memory::stats().peakBytes, before.currentBytes + 1000);
  memory::release(p, 1000);
  EXPECT_EQ(memory::stats().currentBytes, before.currentBytes);
}

namespace {

// The VmFlags of the mapping holding `p` (/proc/self/smaps), "" if none.
std::string vmFlagsAt(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

}  // namespace

TEST(Memory, LargeBlocksAskForHugePages) {
  // A block from the mmap threshold (32 MiB) up is advised MADV_HUGEPAGE
  // (VmFlags "hg"); a small one, from the heap, is not.
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  if (!mode) GTEST_SKIP() << "this kernel has no transparent huge pages";
  const size_t big = 40u << 20, small = 1u << 20;
  void* p = memory::allocate(big);
  void* q = memory::allocate(small);
  const std::string bigFlags = vmFlagsAt(static_cast<char*>(p) + big / 2);
  const std::string smallFlags = vmFlagsAt(q);
  memory::release(p, big);
  memory::release(q, small);
  ASSERT_FALSE(bigFlags.empty());
  EXPECT_NE(bigFlags.find(" hg"), std::string::npos) << bigFlags;
  ASSERT_FALSE(smallFlags.empty());
  EXPECT_EQ(smallFlags.find(" hg"), std::string::npos) << smallFlags;
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  for (int threads : {1, 2, 3}) {
    setNumThreads(threads);
    std::vector<std::atomic<int>> hits(1000);
    parallelFor(0, 1000, 10, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) hits[i]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  setNumThreads(1);
}

// The parts run on distinct threads of the OpenMP team (the caller's included),
// each inside a parallel region (so oneDNN runs single-threaded there).
TEST(ThreadPool, PartsRunOnSeveralThreadsInAParallelRegion) {
  setNumThreads(2);
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> inRegion{0};
  EXPECT_FALSE(inParallelRegion());
  parallelFor(0, 2, 1, [&](int64_t, int64_t) {
    if (inParallelRegion()) inRegion++;
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(inRegion.load(), 2);
  EXPECT_FALSE(inParallelRegion());
  setNumThreads(1);
}

// Ranks that are threads of one process call parallelFor at once: one gets the
// team, the others run inline; every range is covered exactly once.
TEST(ThreadPool, ConcurrentCallersEachCoverTheirRange) {
  setNumThreads(2);
  std::vector<std::vector<std::atomic<int>>> hits(4);
  for (auto& h : hits) h = std::vector<std::atomic<int>>(5000);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] {
      for (int rep = 0; rep < 20; ++rep)
        parallelFor(0, 5000, 100, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) hits[r][i]++;
        });
    });
  for (auto& t : ranks) t.join();
  for (auto& h : hits)
    for (auto& x : h) ASSERT_EQ(x.load(), 20);
  setNumThreads(1);
}

// A team smaller than asked (here none: parallel regions made inactive) still
// covers every part.
TEST(ThreadPool, CoversTheRangeWhenTheTeamIsSmaller) {
  setNumThreads(3);
  const int saved = omp_get_max_active_levels();
  omp_set_max_active_levels(0);
  std::vector<std::atomic<int>> hits(999);
  parallelFor(0, 999, 10, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) hits[i]++;
  });
  omp_set_max_active_levels(saved);
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  setNumThreads(1);
}

TEST(ThreadPool, PropagatesExceptions) {
  setNumThreads(2);
  EXPECT_THROW(parallelFor(0, 100, 1, [](int64_t lo, int64_t) {
                 if (lo > 0) throw Error("boom");
               }),
               Error);
  setNumThreads(1);
  EXPECT_THROW(setNumThreads(0), UsageError);
}
