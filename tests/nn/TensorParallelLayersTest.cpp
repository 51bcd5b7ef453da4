// Tensor-parallel cuts (nn/TensorParallelLayers.h): slices and their inverse, c_attn's
// interleaved q | k | v, which parameters a model's cut touches.
#include <map>

#include <gtest/gtest.h>

#include "nn/Gpt.h"
#include "nn/Models.h"
#include "nn/TensorParallelLayers.h"

namespace dtrain::nn {
namespace {

Tensor iota(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(TensorParallelCuts, RowsOfEachInterleavedGroupGoToTheirRank) {
  // [q0 q1 q2 q3 | k0 .. k3 | v0 .. v3] rows of width 2, 2 ranks: rank 1 holds
  // q2 q3 k2 k3 v2 v3 (its heads' q, k and v).
  const Tensor full = iota({12, 2});
  const Tensor s = takeShard(full, {0, 3}, 1, 2);
  ASSERT_EQ(s.shape(), (Shape{6, 2}));
  const std::vector<int> rows{2, 3, 6, 7, 10, 11};
  for (int i = 0; i < 6; ++i)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(s.data<float>()[i * 2 + c], rows[i] * 2 + c);
}

TEST(TensorParallelCuts, ColumnsAndBack) {
  const Tensor full = iota({3, 8});
  Tensor rebuilt = Tensor::zeros({3, 8});
  for (int r = 0; r < 4; ++r) {
    const Tensor s = takeShard(full, {1, 1}, r, 4);
    ASSERT_EQ(s.shape(), (Shape{3, 2}));
    EXPECT_EQ(s.data<float>()[0], 2 * r);
    EXPECT_EQ(s.data<float>()[2], 8 + 2 * r);
    putShard(rebuilt, s, {1, 1}, r, 4);
  }
  EXPECT_EQ(rebuilt.toVector(), full.toVector());
}

TEST(TensorParallelCuts, UnevenSplitsAreUsageErrors) {
  EXPECT_THROW(takeShard(iota({10, 2}), {0, 1}, 0, 4), UsageError);
  EXPECT_THROW(takeShard(iota({6, 2}), {0, 3}, 0, 4), UsageError);
}

TEST(TensorParallelCuts, GptCutsAttentionAndMlpAndReplicatesTheRest) {
  auto gpt = makeGpt(GptConfig{2, 4, 32, 16, 256}, 1);
  auto group = std::make_shared<TensorParallelGroup>();
  group->rank = 1;
  group->size = 2;
  group->sum = [](float*, int64_t) {};
  const TensorParallelPlan plan = tensorParallelize(*gpt, group);
  // Per block: c_attn weight and bias, attn c_proj weight, c_fc weight and bias, mlp c_proj weight.
  ASSERT_EQ(plan.size(), 12u);
  EXPECT_EQ(plan[0].first, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(plan[0].second.groups, 3);
  EXPECT_EQ(plan[2].first, "transformer.h.0.attn.c_proj.weight");
  EXPECT_EQ(plan[2].second.dim, 1);
  // Expected shapes by name (the bias of c_proj stays whole).
  const std::map<std::string, Shape> expected = {{"transformer.h.0.attn.c_attn.weight", {48, 32}},
                                                 {"transformer.h.0.attn.c_proj.weight", {32, 16}},
                                                 {"transformer.h.0.attn.c_proj.bias", {32}},
                                                 {"transformer.h.1.mlp.c_fc.bias", {64}},
                                                 {"transformer.wte.weight", {256, 32}}};
  for (auto& [name, p] : gpt->namedParameters()) {
    const auto it = expected.find(name);
    if (it != expected.end()) {
      EXPECT_EQ(p.shape(), it->second) << name;
    }
  }
}

TEST(TensorParallelCuts, MlpPairsItsFirstTwoLinearLayers) {
  auto mlp = makeModel("mlp", 1);
  auto group = std::make_shared<TensorParallelGroup>();
  group->size = 2;
  group->sum = [](float*, int64_t) {};
  const TensorParallelPlan plan = tensorParallelize(*mlp, group);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].first, "1.weight");
  EXPECT_EQ(plan[1].first, "1.bias");
  EXPECT_EQ(plan[2].first, "3.weight");
  EXPECT_EQ(plan[2].second.dim, 1);
}

}  // namespace
}  // namespace dtrain::nn
