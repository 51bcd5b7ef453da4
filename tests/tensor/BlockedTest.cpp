// Channel-blocked activations (MemoryFormat::ChannelBlocked, tensor/cpu/Blocked.h):
// the tensor's format conversions, and BatchNorm's and global pooling's blocked
// kernels against the plain ones on the same data.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/KernelTestUtil.h"
#include "tensor/Tensor.h"
#include "tensor/cpu/Blocked.h"
#include "tensor/cpu/Norm.h"
#include "tensor/cpu/Pool.h"

using namespace dtrain;
using namespace dtrain::kernels;
using dtrain::testutil::randomVector;

namespace {

constexpr int64_t kN = 3, kC = 32, kH = 5, kW = 3, kS = kH * kW;

Tensor plainTensor(uint64_t seed) {
  return Tensor::fromVector(randomVector(kN * kC * kS, seed), {kN, kC, kH, kW});
}

std::vector<float> blockedOf(const std::vector<float>& plain) {
  std::vector<float> out(plain.size());
  toChannelBlocked(plain.data(), out.data(), kN, kC, kS);
  return out;
}
std::vector<float> plainOf(const std::vector<float>& blocked) {
  std::vector<float> out(blocked.size());
  fromChannelBlocked(blocked.data(), out.data(), kN, kC, kS);
  return out;
}

}  // namespace

TEST(BlockedTensor, LayoutIsNChw16c) {
  const Tensor x = plainTensor(1);
  const Tensor b = x.toFormat(MemoryFormat::ChannelBlocked);
  ASSERT_TRUE(b.blocked());
  EXPECT_FALSE(b.isContiguous());
  // Channel c of pixel s in image n sits at ((n * C/16 + c/16) * S + s) * 16 + c % 16.
  const int64_t n = 2, c = 19, s = 7;
  EXPECT_EQ(b.data<float>()[((n * (kC / 16) + c / 16) * kS + s) * 16 + c % 16],
            x.data<float>()[(n * kC + c) * kS + s]);
}

TEST(BlockedTensor, PlainConsumersSeeThePlainValues) {
  const Tensor x = plainTensor(2);
  const Tensor b = x.toFormat(MemoryFormat::ChannelBlocked);
  EXPECT_EQ(b.toVector(), x.toVector());
  EXPECT_EQ(b.contiguous().toVector(), x.toVector());
  EXPECT_FALSE(b.contiguous().blocked());
  EXPECT_EQ(b.reshape({kN, -1}).toVector(), x.reshape({kN, -1}).toVector());
  EXPECT_EQ(b.at({1, 17, 2, 1}), x.at({1, 17, 2, 1}));
  EXPECT_EQ(b.slice(1, 16, 32).contiguous().toVector(), x.slice(1, 16, 32).contiguous().toVector());
  const Tensor copy = b.clone();
  EXPECT_TRUE(copy.blocked());
  EXPECT_EQ(copy.toVector(), x.toVector());
  Tensor into = Tensor::empty(x.shape());
  into.copyFrom(b);
  EXPECT_EQ(into.toVector(), x.toVector());
  EXPECT_THROW(b.view({kN, -1}), Error);  // a view would reinterpret the blocks
  EXPECT_THROW(Tensor::emptyBlocked({2, 12, 3, 3}), Error);  // 12 channels: no whole block
}

// Same per-element arithmetic as the plain kernel: the same bits.
TEST(BlockedBatchNorm, ApplyAndBackwardApplyGiveThePlainBits) {
  const auto x = randomVector(kN * kC * kS, 3), r = randomVector(kN * kC * kS, 4);
  const auto scale = randomVector(kC, 5), shift = randomVector(kC, 6);
  std::vector<float> y(x.size()), yb(x.size());
  for (bool relu : {false, true})
    for (const float* res : {static_cast<const float*>(nullptr), r.data()}) {
      batchNormApply(x.data(), scale.data(), shift.data(), res, relu, y.data(), kN, kC, kS);
      const auto rb = blockedOf(r);
      batchNormApplyBlocked(blockedOf(x).data(), scale.data(), shift.data(),
                            res ? rb.data() : nullptr, relu, yb.data(), kN, kC, kS);
      EXPECT_EQ(plainOf(yb), y) << "relu " << relu << " residual " << (res != nullptr);
    }
  const auto g = randomVector(x.size(), 7), mean = randomVector(kC, 8), k = randomVector(kC, 9),
             mg = randomVector(kC, 10), q = randomVector(kC, 11);
  batchNormBackwardApply(x.data(), g.data(), mean.data(), k.data(), mg.data(), q.data(), y.data(),
                         kN, kC, kS);
  batchNormBackwardApplyBlocked(blockedOf(x).data(), blockedOf(g).data(), mean.data(), k.data(),
                                mg.data(), q.data(), yb.data(), kN, kC, kS);
  EXPECT_EQ(plainOf(yb), y);
}

// The sums add in another order: equal to float rounding; the ReLU mask exactly.
TEST(BlockedBatchNorm, SumsMatchThePlainKernels) {
  const auto x = randomVector(kN * kC * kS, 12), y = randomVector(x.size(), 13),
             gy = randomVector(x.size(), 14), pivot = randomVector(kC, 15);
  std::vector<double> a(2 * kC), b(2 * kC);
  batchNormSums(x.data(), pivot.data(), a.data(), a.data() + kC, kN, kC, kS);
  batchNormSumsBlocked(blockedOf(x).data(), pivot.data(), b.data(), b.data() + kC, kN, kC, kS);
  for (int64_t i = 0; i < 2 * kC; ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::abs(a[i])));
  std::vector<float> masked(x.size()), maskedB(x.size());
  batchNormBackwardSums(x.data(), y.data(), gy.data(), pivot.data(), masked.data(), a.data(),
                        a.data() + kC, kN, kC, kS);
  batchNormBackwardSumsBlocked(blockedOf(x).data(), blockedOf(y).data(), blockedOf(gy).data(),
                               pivot.data(), maskedB.data(), b.data(), b.data() + kC, kN, kC, kS);
  EXPECT_EQ(plainOf(maskedB), masked);
  for (int64_t i = 0; i < 2 * kC; ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::abs(a[i])));
}

TEST(BlockedPool, GlobalAverageGivesThePlainBits) {
  const auto x = randomVector(kN * kC * kS, 16), gy = randomVector(kN * kC, 17);
  const PoolShape s{kN, kC, kH, kW, kH, kW, kH, kW, 0, 0};
  std::vector<float> y(kN * kC), yb(kN * kC), gx(x.size()), gxb(x.size());
  avgPool2dForward(s, x.data(), y.data());
  globalAvgPoolBlocked(blockedOf(x).data(), yb.data(), kN, kC, kS);
  EXPECT_EQ(yb, y);
  avgPool2dBackward(s, gy.data(), gx.data());
  globalAvgPoolBackwardBlocked(gy.data(), gxb.data(), kN, kC, kS);
  EXPECT_EQ(plainOf(gxb), gx);
}
