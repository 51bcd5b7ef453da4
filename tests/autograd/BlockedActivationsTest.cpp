// Activations kept channel-blocked between layers (conv2d's `output` format,
// BatchNorm, global pooling): finite differences through the blocked chain,
// the same values as the plain chain, and plain consumers of blocked outputs.
#include <gtest/gtest.h>

#include "TestData.h"
#include "autograd/GradCheck.h"
#include "autograd/Ops.h"
#include "tensor/cpu/ConvDispatch.h"

using namespace dtrain;
using namespace dtrain::autograd;
using dtrain::test::randn;

namespace {

constexpr MemoryFormat kBlocked = MemoryFormat::ChannelBlocked;

bool blockable() { return kernels::convBlockable({1, 16, 4, 4, 16, 3, 3}); }

// conv -> BN + ReLU -> conv -> BN + residual + ReLU -> conv (1x1, stride 2)
// -> global average: a ResNet block's ops, every activation in `format`.
Variable block(const std::vector<Variable>& v, MemoryFormat format, Tensor& rm, Tensor& rv) {
  BatchNormSpec spec;
  spec.runMean = &rm;
  spec.runVar = &rv;
  spec.relu = true;
  Variable stem = conv2d(v[0], v[1], Variable(), 1, 1, format);
  Variable h = batchNorm2dAct(stem, v[3], v[4], Variable(), spec);
  Variable h2 = conv2d(h, v[2], Variable(), 1, 1, format);
  Variable out = batchNorm2dAct(h2, v[3], v[4], h, spec);
  return globalAvgPool2d(conv2d(out, v[5], Variable(), 2, 0, format));
}

std::vector<Tensor> blockInputs() {
  // x, the stem (3 -> 16) and 3x3 (16 -> 16) weights, gamma, beta, the 1x1 (16 -> 32) weight.
  return {randn({2, 3, 5, 5}, 1),        randn({16, 3, 3, 3}, 2, 0.3f),
          randn({16, 16, 3, 3}, 3, 0.1f), randn({16}, 4, 0.1f),
          randn({16}, 5, 0.5f),          randn({32, 16, 1, 1}, 6, 0.3f)};
}

}  // namespace

TEST(BlockedActivations, ConvOutputIsBlockedOnlyWhereAsked) {
  if (!blockable()) GTEST_SKIP() << "no oneDNN AVX-512 convolutions on this CPU";
  Variable x(randn({2, 16, 4, 4}, 1)), w(randn({16, 16, 3, 3}, 2)), w8(randn({8, 16, 3, 3}, 3));
  EXPECT_TRUE(conv2d(x, w, Variable(), 1, 1, kBlocked).data().blocked());
  EXPECT_FALSE(conv2d(x, w, Variable(), 1, 1).data().blocked());
  EXPECT_FALSE(conv2d(x, w8, Variable(), 1, 1, kBlocked).data().blocked());  // 8 channels
}

// The blocked and plain chains run the same convolution kernels (oneDNN's,
// reordering the plain operands) and the same per-element BatchNorm; only the
// BatchNorm sums add in another order.
TEST(BlockedActivations, SameValuesAndGradientsAsPlain) {
  if (!blockable()) GTEST_SKIP() << "no oneDNN AVX-512 convolutions on this CPU";
  const auto inputs = blockInputs();
  std::vector<std::vector<float>> values[2];
  for (int blocked = 0; blocked < 2; ++blocked) {
    std::vector<Variable> v;
    for (const Tensor& t : inputs) v.emplace_back(t.clone(), true);
    Tensor rm = Tensor::zeros({16}), rv = Tensor::full({16}, 1.f);
    Variable y = block(v, blocked ? kBlocked : MemoryFormat::Plain, rm, rv);
    sum(mul(y, Variable(randn(y.shape(), 9)))).backward();
    values[blocked].push_back(y.data().toVector());
    values[blocked].push_back(rm.toVector());
    for (const Variable& p : v) values[blocked].push_back(p.grad().toVector());
  }
  for (size_t i = 0; i < values[0].size(); ++i) {
    ASSERT_EQ(values[0][i].size(), values[1][i].size());
    for (size_t k = 0; k < values[0][i].size(); ++k)
      EXPECT_NEAR(values[1][i][k], values[0][i][k], 1e-4 * (1 + std::abs(values[0][i][k])))
          << "tensor " << i << " element " << k;
  }
}

TEST(BlockedActivations, FiniteDifferencesThroughTheBlockedChain) {
  if (!blockable()) GTEST_SKIP() << "no oneDNN AVX-512 convolutions on this CPU";
  Tensor rm = Tensor::zeros({16}), rv = Tensor::full({16}, 1.f);
  GradCheckOptions o;
  o.eps = 1e-3;
  o.atol = 5e-3;
  o.rtol = 5e-2;
  auto r = gradCheck([&](const std::vector<Variable>& v) { return block(v, kBlocked, rm, rv); },
                     blockInputs(), o);
  EXPECT_TRUE(r.ok) << r.worst << " (error " << r.worstError << ")";
}

// A layer that does not know the layout (here mul, reshape) reads the plain
// values, and its gradient reaches the blocked producer reordered.
TEST(BlockedActivations, PlainConsumersReadAndGradeTheBlockedOutput) {
  if (!blockable()) GTEST_SKIP() << "no oneDNN AVX-512 convolutions on this CPU";
  const Tensor x = randn({2, 16, 4, 4}, 1), w = randn({16, 16, 3, 3}, 2), u = randn({2, 256}, 3);
  std::vector<float> grads[2], outs[2];
  for (int blocked = 0; blocked < 2; ++blocked) {
    Variable vx(x.clone(), true), vw(w.clone(), true);
    Variable y = conv2d(vx, vw, Variable(), 1, 1, blocked ? kBlocked : MemoryFormat::Plain);
    EXPECT_EQ(y.data().blocked(), blocked == 1);
    Variable flat = reshape(y, {2, 256});
    outs[blocked] = flat.data().toVector();
    sum(mul(flat, Variable(u))).backward();
    grads[blocked] = vx.grad().toVector();
    auto gw = vw.grad().toVector();
    grads[blocked].insert(grads[blocked].end(), gw.begin(), gw.end());
  }
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_EQ(grads[1], grads[0]);
}
