// Parameter-server sharding: every float served exactly once, contiguous
// ranges of about total/S per server, large tensors split, small ones batched.
#include <gtest/gtest.h>

#include <numeric>

#include "core/Error.h"
#include "nn/Models.h"
#include "parallel/ps/ShardPlan.h"

namespace dtrain::parallel::ps {
namespace {

void checkPlan(const std::vector<int64_t>& sizes, int servers) {
  const ShardPlan plan = planShards(sizes, servers);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  ASSERT_EQ(plan.total, total);
  ASSERT_EQ(plan.servers(), servers);
  std::vector<int> owner(total, -1);
  std::vector<int64_t> paramStart(sizes.size(), 0);
  for (size_t p = 1; p < sizes.size(); ++p) paramStart[p] = paramStart[p - 1] + sizes[p - 1];
  for (int s = 0; s < servers; ++s) {
    // Balanced: within one cache line of total/S.
    EXPECT_LE(plan.shardSize(s), (total + servers - 1) / servers + 16) << "server " << s;
    EXPECT_GE(plan.shardSize(s), total / servers - 16) << "server " << s;
    int64_t next = 0;  // slices tile the server's buffer in order
    for (const ShardSlice& sl : plan.slices[s]) {
      EXPECT_EQ(sl.shardOffset, next);
      EXPECT_GT(sl.length, 0);
      EXPECT_LE(sl.offset + sl.length, sizes[sl.param]);
      next += sl.length;
      for (int64_t i = 0; i < sl.length; ++i) {
        auto& o = owner[paramStart[sl.param] + sl.offset + i];
        EXPECT_EQ(o, -1) << "served twice";
        o = s;
      }
    }
    EXPECT_EQ(next, plan.shardSize(s));
  }
  EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0) << "a float has no server";
}

TEST(ShardPlan, BalancedAndCompleteForManyShapes) {
  for (int s = 1; s <= 7; ++s) {
    checkPlan({784 * 256, 256, 256 * 256, 256, 256 * 10, 10}, s);  // mlp
    checkPlan({1, 2, 3, 5, 8, 13, 21, 34}, s);                    // tiny tensors
    checkPlan({100003}, s);                                       // one large tensor
    checkPlan({7, 1000, 3, 99999, 17}, s);
  }
}

TEST(ShardPlan, SplitsLargeTensorsAndBatchesSmallOnes) {
  // One huge tensor and many small ones: each server gets a range of the
  // huge one; the small ones all go to the server whose range they fall in.
  std::vector<int64_t> sizes{1 << 20};
  for (int i = 0; i < 50; ++i) sizes.push_back(10);
  const ShardPlan plan = planShards(sizes, 4);
  for (int s = 0; s < 4; ++s) {
    ASSERT_FALSE(plan.slices[s].empty());
    EXPECT_EQ(plan.slices[s][0].param, 0u) << "every server holds a range of the large tensor";
  }
  EXPECT_EQ(plan.slices[3].size(), 51u) << "the small tensors travel with the last range";
}

TEST(ShardPlan, MoreServersThanParametersIsAUsageError) {
  EXPECT_THROW(planShards({2, 1}, 4), UsageError);
  EXPECT_THROW(planShards({10}, 0), UsageError);
}

TEST(ShardPlan, GatherAddScatterRoundTrip) {
  std::vector<std::vector<float>> params{{1, 2, 3}, {4, 5, 6, 7, 8}, {9}};
  const ShardPlan plan = planShards({3, 5, 1}, 2);
  std::vector<const float*> in;
  std::vector<float*> out;
  std::vector<std::vector<float>> back(3);
  for (size_t p = 0; p < params.size(); ++p) {
    in.push_back(params[p].data());
    back[p].assign(params[p].size(), 0);
    out.push_back(back[p].data());
  }
  for (int s = 0; s < 2; ++s) {
    std::vector<float> shard(plan.shardSize(s), 0);
    gatherShard(plan, s, in, shard.data());
    addToShard(plan, s, in, shard.data());  // now twice the values
    scatterShard(plan, s, shard.data(), out);
  }
  for (size_t p = 0; p < params.size(); ++p)
    for (size_t i = 0; i < params[p].size(); ++i) EXPECT_EQ(back[p][i], 2 * params[p][i]);
}

}  // namespace
}  // namespace dtrain::parallel::ps
