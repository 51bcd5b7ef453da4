// bf16 autocast of linear layers and convolutions: the same numbers as fp32
// products of the rounded operands, fp32 gradients, half the bytes kept for
// backward.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "core/Error.h"
#include "core/Memory.h"
#include "core/Rng.h"
#include "tensor/cpu/Bf16.h"

using namespace dtrain;
using namespace dtrain::autograd;

namespace {

Tensor randomTensor(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = rng.uniform(-1.f, 1.f);
  return t;
}

// x rounded to bf16 and back: what the bf16 products see.
Tensor roundedToBf16(const Tensor& x) {
  Tensor b = Tensor::empty(x.shape(), DType::BF16), out = Tensor::empty(x.shape());
  kernels::toBf16(x.data<float>(), b.data<BFloat16>(), x.numel());
  kernels::fromBf16(b.data<BFloat16>(), out.data<float>(), x.numel());
  return out;
}

void expectClose(const Tensor& a, const Tensor& b, double tol, const char* what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], tol) << what << " at " << i;
}

}  // namespace

TEST(Precision, Bf16LinearIsTheFp32ProductOfRoundedOperands) {
  const Tensor x0 = randomTensor({6, 5, 40}, 1), w0 = randomTensor({24, 40}, 2),
               b0 = randomTensor({24}, 3), gy = randomTensor({6, 5, 24}, 4);
  Variable x(x0.clone(), true), w(w0.clone(), true), b(b0.clone(), true);
  {
    PrecisionScope bf16(Precision::BF16);
    linear(x, w, b).backward(gy);
  }
  EXPECT_EQ(precision(), Precision::FP32);  // the scope restores the setting
  // Reference: fp32 products of the rounded operands (gy is rounded for the
  // backward products as well; the bias gradient sums fp32 gy).
  Variable xr(roundedToBf16(x0), true), wr(roundedToBf16(w0), true), br(b0.clone(), true);
  Variable y = linear(xr, wr, br);
  Tensor yBf16;
  {
    PrecisionScope bf16(Precision::BF16);
    yBf16 = linear(Variable(x0), Variable(w0), Variable(b0)).data();
  }
  expectClose(yBf16, y.data(), 1e-5, "y");
  // Gradients from rounded gy: compare with the fp32 graph fed roundedToBf16(gy).
  y.backward(roundedToBf16(gy));
  expectClose(x.grad(), xr.grad(), 1e-5, "dx");
  expectClose(w.grad(), wr.grad(), 1e-4, "dW");
  Variable bFull(b0.clone(), true);
  linear(Variable(x0), Variable(w0), bFull).backward(gy);
  expectClose(b.grad(), bFull.grad(), 1e-6, "db");  // fp32 gy, not rounded
  EXPECT_EQ(x.grad().dtype(), DType::F32);
  EXPECT_EQ(w.grad().dtype(), DType::F32);
}

TEST(Precision, Bf16LinearKeepsHalfTheBytesForBackward) {
  const Tensor x0 = randomTensor({256, 512}, 5), w0 = randomTensor({64, 512}, 6);
  auto kept = [&](Precision p) {
    PrecisionScope scope(p);
    Variable x(x0.clone(), true), w(w0.clone(), true);
    const int64_t before = memory::stats().currentBytes;
    Variable y = linear(x, w, Variable());
    // What the graph holds beyond y: the operands saved for backward.
    return memory::stats().currentBytes - before - y.data().nbytes();
  };
  const int64_t fp32 = kept(Precision::FP32), bf16 = kept(Precision::BF16);
  // fp32 shares x and W with the leaves (no copy); bf16 holds its own half-size
  // copies. Count against the fp32 operand bytes instead.
  EXPECT_EQ(fp32, 0);
  EXPECT_EQ(bf16, (x0.nbytes() + w0.nbytes()) / 2);
}

// lenet's layers under bf16: conv1 runs on dtrain's kernels (widened bf16
// operands), conv2 on oneDNN's bf16 kernels where the CPU has them
// (ConvDispatch.h); both are the fp32 convolution of the rounded operands, and
// the gradients (bias included) come from gy rounded to bf16.
TEST(Precision, Bf16Conv2dIsTheFp32ConvolutionOfRoundedOperands) {
  struct Case {
    Shape x, w;
    int64_t padding;
  };
  for (const Case& c :
       {Case{{3, 1, 28, 28}, {6, 1, 5, 5}, 2}, Case{{3, 6, 14, 14}, {16, 6, 5, 5}, 0}}) {
    const Tensor x0 = randomTensor(c.x, 1), w0 = randomTensor(c.w, 2),
                 b0 = randomTensor({c.w[0]}, 3);
    Variable x(x0.clone(), true), w(w0.clone(), true), b(b0.clone(), true);
    Variable y;
    {
      PrecisionScope bf16(Precision::BF16);
      y = conv2d(x, w, b, 1, c.padding);
    }
    const Tensor gy = randomTensor(y.data().shape(), 4);
    y.backward(gy);
    Variable xr(roundedToBf16(x0), true), wr(roundedToBf16(w0), true), br(b0.clone(), true);
    Variable yr = conv2d(xr, wr, br, 1, c.padding);
    yr.backward(roundedToBf16(gy));
    expectClose(y.data(), yr.data(), 1e-4, "y");
    expectClose(x.grad(), xr.grad(), 1e-4, "dx");
    expectClose(w.grad(), wr.grad(), 1e-3, "dW");  // sums of 3 * 784 or 3 * 100 products
    expectClose(b.grad(), br.grad(), 1e-3, "db");
    EXPECT_EQ(w.grad().dtype(), DType::F32);
  }
}

TEST(Precision, Bf16Conv2dKeepsHalfTheBytesForBackward) {
  const Tensor x0 = randomTensor({8, 6, 14, 14}, 5), w0 = randomTensor({16, 6, 5, 5}, 6);
  auto kept = [&](Precision p) {
    PrecisionScope scope(p);
    Variable x(x0.clone(), true), w(w0.clone(), true);
    const int64_t before = memory::stats().currentBytes;
    Variable y = conv2d(x, w, Variable(), 1, 0);
    return memory::stats().currentBytes - before - y.data().nbytes();
  };
  for (Precision p : {Precision::FP32, Precision::BF16}) kept(p);  // kernels' scratch grows once
  EXPECT_EQ(kept(Precision::FP32), 0);  // shares x and w with the leaves
  EXPECT_EQ(kept(Precision::BF16), (x0.nbytes() + w0.nbytes()) / 2);
}

// Attention, GELU and layer norm save bf16 too: what their nodes hold for
// backward once the fp32 input is dropped (a non-leaf, as in a model) is half
// of fp32's. Attention keeps qkv and y (plus the fp32 log-sum-exp per row; in
// fp32 its y is the output itself), GELU its derivative, layer norm its input
// (plus fp32 mean and 1/std per row).
TEST(Precision, Bf16AttentionGeluLayerNormKeepHalfTheBytesForBackward) {
  const Tensor a0 = randomTensor({2, 64, 96}, 7);  // qkv of C = 32, 2 heads
  enum Op { Attention, Gelu, LayerNorm };
  auto kept = [&](Precision p, Op op) {
    PrecisionScope scope(p);
    Variable leaf(a0.clone(), true);
    const int64_t before = memory::stats().currentBytes;
    Variable y;
    {
      Variable input = scale(leaf, 1.0f);  // a non-leaf the graph may drop
      y = op == Attention ? causalSelfAttention(input, 2)
          : op == Gelu    ? gelu(input)
                          : layerNorm(input, Variable(), Variable(), 1e-5f);
    }
    return memory::stats().currentBytes - before - y.data().nbytes();
  };
  // The kernels' per-thread scratch tiles grow once, at their first use: warm up.
  for (Precision p : {Precision::FP32, Precision::BF16}) kept(p, Attention);
  const int64_t lse = 2 * 2 * 64 * 4;  // [B, H, T] fp32, kept in both precisions
  const int64_t qkv = a0.nbytes(), y = a0.nbytes() / 3;
  EXPECT_EQ(kept(Precision::FP32, Attention), qkv + lse);
  EXPECT_EQ(kept(Precision::BF16, Attention), (qkv + y) / 2 + lse);
  EXPECT_EQ(kept(Precision::FP32, Gelu), a0.nbytes());
  EXPECT_EQ(kept(Precision::BF16, Gelu), a0.nbytes() / 2);
  const int64_t rowStats = 2 * (2 * 64) * 4;  // mean and 1/std per row, fp32
  EXPECT_EQ(kept(Precision::FP32, LayerNorm), a0.nbytes() + rowStats);
  EXPECT_EQ(kept(Precision::BF16, LayerNorm), a0.nbytes() / 2 + rowStats);
}

// A layer norm backward from the bf16 copy of its input is within bf16's
// resolution of the fp32 one.
TEST(Precision, Bf16LayerNormGradientIsCloseToFp32) {
  const Tensor x0 = randomTensor({8, 48}, 9), g0 = randomTensor({48}, 10), gy = randomTensor({8, 48}, 11);
  auto grads = [&](Precision p) {
    PrecisionScope scope(p);
    Variable x(x0.clone(), true), g(g0.clone(), true);
    Variable y = layerNorm(scale(x, 1.0f), g, Variable(), 1e-5f);
    y.backward(gy);
    return std::make_pair(x.grad().toVector(), g.grad().toVector());
  };
  const auto a = grads(Precision::FP32), b = grads(Precision::BF16);
  for (size_t i = 0; i < a.first.size(); ++i) EXPECT_NEAR(a.first[i], b.first[i], 2e-2) << i;
  for (size_t i = 0; i < a.second.size(); ++i) EXPECT_NEAR(a.second[i], b.second[i], 2e-2) << i;
  EXPECT_NE(a.first, b.first);
}

TEST(Precision, NamesAndErrors) {
  EXPECT_EQ(parsePrecision("fp32"), Precision::FP32);
  EXPECT_EQ(parsePrecision("bf16"), Precision::BF16);
  EXPECT_THROW(parsePrecision("fp16"), UsageError);
  try {
    parsePrecision("int8");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("known: fp32, bf16"), std::string::npos);
  }
}
