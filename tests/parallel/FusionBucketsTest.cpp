// Tensor fusion's grouping rule (parallel/allreduce/FusionBuckets.h), which
// the trainer's buckets and the simulator's memory model both follow.
#include <gtest/gtest.h>

#include "autograd/Variable.h"
#include "parallel/allreduce/FusionBuckets.h"

using namespace dtrain;

TEST(FusionBuckets, ABucketClosesOnceItHoldsTheLimit) {
  // 100-byte limit: 60 + 50 close the first (110 >= 100), 200 alone, 10 + 10 the rest.
  EXPECT_EQ(parallel::fusionBucketStarts({60, 50, 200, 10, 10}, 100), (std::vector<size_t>{0, 2, 3}));
  // An isolated tensor gets a bucket of its own and closes it behind it.
  EXPECT_EQ(parallel::fusionBucketStarts({10, 10, 10, 10}, 100, {0, 1, 0, 0}), (std::vector<size_t>{0, 1, 2}));
  EXPECT_TRUE(parallel::fusionBucketStarts({}, 100).empty());
}

TEST(FusionBuckets, TheTrainersBucketsAreGroupedInLaunchOrder) {
  // Registered a (40 floats), b (10), c (30): launched c, b, a; a 100-byte
  // limit closes {c} (120 bytes) and then {b, a}.
  std::vector<autograd::Variable> params;
  for (int64_t n : {40, 10, 30}) params.emplace_back(Tensor::zeros({n}), true);
  const auto buckets = parallel::makeFusionBuckets(params, 100);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].numel(), 30);
  ASSERT_EQ(buckets[1].params.size(), 2u);
  EXPECT_EQ(buckets[1].params[0].numel(), 10);
  EXPECT_EQ(buckets[1].numel(), 50);
}
