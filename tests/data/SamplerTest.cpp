#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "data/DataTestUtil.h"
#include "data/DistributedSampler.h"

using namespace dtrain;
using namespace dtrain::data;

namespace {

DistributedSampler make(int64_t n, int64_t batch, int world, bool shuffle, uint64_t seed = 5) {
  return DistributedSampler({.datasetSize = n,
                             .localBatch = batch,
                             .worldSize = world,
                             .seed = seed,
                             .shuffle = shuffle});
}

}  // namespace

TEST(DistributedSampler, UnionOfWorkersEqualsSingleWorkerBatch) {
  const int64_t n = 1003, B = 8;
  for (bool shuffle : {true, false}) {
    for (int W = 1; W <= 4; ++W) {
      const auto multi = make(n, B, W, shuffle);
      const auto single = make(n, W * B, 1, shuffle);
      ASSERT_EQ(multi.stepsPerEpoch(), single.stepsPerEpoch());
      EXPECT_EQ(multi.stepsPerEpoch(), n / (W * B));
      for (int64_t epoch : {0, 1, 7}) {
        const auto perm = multi.permutation(epoch);
        for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{5}, multi.stepsPerEpoch() - 1}) {
          std::vector<int64_t> joined;
          for (int r = 0; r < W; ++r) {
            auto local = multi.indices(epoch, step, r);
            ASSERT_EQ(static_cast<int64_t>(local.size()), B);
            auto view = multi.slice(perm, step, r);
            ASSERT_TRUE(std::equal(view.begin(), view.end(), local.begin(), local.end()));
            joined.insert(joined.end(), local.begin(), local.end());
          }
          EXPECT_EQ(joined, single.indices(epoch, step, 0)) << "W=" << W << " step=" << step;
          EXPECT_EQ(joined, multi.globalIndices(epoch, step));
        }
      }
    }
  }
}

TEST(DistributedSampler, NoIndexRepeatedWithinAnEpoch) {
  const auto s = make(1000, 7, 3, true);
  const auto perm = s.permutation(2);
  std::set<int64_t> seen;
  for (int64_t step = 0; step < s.stepsPerEpoch(); ++step)
    for (int r = 0; r < 3; ++r)
      for (int64_t i : s.slice(perm, step, r)) {
        ASSERT_TRUE(i >= 0 && i < 1000);
        ASSERT_TRUE(seen.insert(i).second) << "index " << i << " repeated";
      }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), s.stepsPerEpoch() * 21);
  EXPECT_EQ(s.droppedPerEpoch(), 1000 - static_cast<int64_t>(seen.size()));
  auto sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);  // a permutation
}

TEST(DistributedSampler, EpochsAndSeedsDifferShuffleOffIsIdentity) {
  const auto s = make(500, 10, 2, true);
  EXPECT_NE(s.permutation(0), s.permutation(1));
  EXPECT_NE(s.permutation(1), s.permutation(2));
  EXPECT_EQ(s.permutation(3), make(500, 10, 2, true).permutation(3));  // deterministic
  EXPECT_NE(s.permutation(0), make(500, 10, 2, true, 6).permutation(0));
  const auto off = make(500, 10, 2, false);
  EXPECT_EQ(off.permutation(0), off.permutation(9));
  EXPECT_EQ(off.indices(4, 3, 1), (std::vector<int64_t>{70, 71, 72, 73, 74, 75, 76, 77, 78, 79}));
}

TEST(DistributedSampler, ResumePositionAndErrors) {
  const auto s = make(100, 10, 3, true);  // G = 30, 3 steps, 10 dropped
  EXPECT_EQ(s.stepsPerEpoch(), 3);
  EXPECT_EQ(s.droppedPerEpoch(), 10);
  EXPECT_EQ(s.advance({0, 1}), (Position{0, 2}));
  EXPECT_EQ(s.advance({0, 2}), (Position{1, 0}));
  EXPECT_THROW(s.indices(0, 3, 0), Error);
  EXPECT_THROW(s.indices(0, 0, 3), Error);
  EXPECT_THROW(s.indices(-1, 0, 0), Error);
  const std::string msg = dtrain::data::test::errorOf<UsageError>([] { make(100, 40, 3, true); });
  EXPECT_EQ(
      msg, "dataset of 100 samples is smaller than one global batch of 120 (3 workers x batch 40)");
  EXPECT_THROW(make(100, 0, 1, true), UsageError);
  EXPECT_THROW(make(100, 1, 0, true), UsageError);
}
