// The ops of a GPT: batched matmul, fused causal attention (against a naive
// reference and by finite differences), GELU's vectorized erf, and the
// [B, T, C] forms of linear, layerNorm, embedding and crossEntropy.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "TestData.h"
#include "autograd/GradCheck.h"
#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "core/Rng.h"
#include "core/ThreadPool.h"
#include "tensor/cpu/Attention.h"
#include "tensor/cpu/Elementwise.h"
#include "tensor/cpu/FastMath.h"

using namespace dtrain;
using dtrain::test::randn;
using namespace dtrain::autograd;

namespace {


void expectGrad(const GradCheckFn& fn, const std::vector<Tensor>& in) {
  auto r = gradCheck(fn, in);
  EXPECT_TRUE(r.ok) << r.worst << " (error " << r.worstError << ")";
}

// Naive causal attention in double: explicit [T, T] scores, mask, softmax.
// Returns y [B, T, C]; with gy, also the gradient of sum(y * gy) in gqkv.
std::vector<double> naiveAttention(const Tensor& qkv, int64_t H, const Tensor* gy = nullptr,
                                   std::vector<double>* gqkv = nullptr) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H;
  const float* x = qkv.data<float>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> y(B * T * C, 0.0);
  if (gqkv) gqkv->assign(qkv.numel(), 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t d) {
    return (b * T + t) * 3 * C + part * C + h * D + d;
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> p(T * T, 0.0);
      for (int64_t i = 0; i < T; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(x[at(b, i, 0, h, d)]) * x[at(b, j, 1, h, d)];
          p[i * T + j] = s * scale;
          m = std::max(m, p[i * T + j]);
        }
        double z = 0;
        for (int64_t j = 0; j <= i; ++j) z += (p[i * T + j] = std::exp(p[i * T + j] - m));
        for (int64_t j = 0; j <= i; ++j) p[i * T + j] /= z;
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < D; ++d)
            y[(b * T + i) * C + h * D + d] += p[i * T + j] * x[at(b, j, 2, h, d)];
      }
      if (!gy) continue;
      const float* g = gy->data<float>();
      auto& gx = *gqkv;
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> dp(i + 1, 0.0);
        double rowDot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < D; ++d) {
            const double go = g[(b * T + i) * C + h * D + d];
            dp[j] += go * x[at(b, j, 2, h, d)];
            gx[at(b, j, 2, h, d)] += p[i * T + j] * go;
          }
          rowDot += dp[j] * p[i * T + j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[i * T + j] * (dp[j] - rowDot) * scale;
          for (int64_t d = 0; d < D; ++d) {
            gx[at(b, i, 0, h, d)] += ds * x[at(b, j, 1, h, d)];
            gx[at(b, j, 1, h, d)] += ds * x[at(b, i, 0, h, d)];
          }
        }
      }
    }
  return y;
}

void expectNear(const float* got, const std::vector<double>& want, double tol, const char* what) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i]));
    if (!(e <= worst)) worst = e, at = i;
  }
  EXPECT_LE(worst, tol) << what << " element " << at << ": " << got[at] << " vs " << want[at];
}

}  // namespace

TEST(GptOps, BmmGradientsAllTransposes) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Shape sa = ta ? Shape{2, 4, 3} : Shape{2, 3, 4};  // op(a) [2, 3, 4]
      Shape sb = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};  // op(b) [2, 4, 5]
      expectGrad([=](auto& v) { return bmm(v[0], v[1], ta, tb); }, {randn(sa, 1), randn(sb, 2)});
    }
}

TEST(GptOps, BmmMatchesMatmulPerBatch) {
  Tensor a = randn({3, 4, 6}, 1), b = randn({3, 6, 5}, 2);
  Tensor y = bmm(Variable(a), Variable(b)).data();
  ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
  for (int64_t i = 0; i < 3; ++i) {
    Tensor yi = matmul(Variable(a.select(0, i).contiguous()), Variable(b.select(0, i).contiguous())).data();
    EXPECT_EQ(y.select(0, i).contiguous().toVector(), yi.toVector());
  }
  EXPECT_THROW(bmm(Variable(a), Variable(a)), Error);
}

TEST(GptOps, AttentionMatchesNaiveReference) {
  // T around the 64-row tiles: one partial tile, exact tiles, several tiles with a remainder.
  struct Case { int64_t B, T, C, H; };
  for (Case c : {Case{2, 1, 8, 2}, Case{2, 5, 16, 4}, Case{1, 64, 16, 2}, Case{2, 65, 24, 3},
                 Case{1, 130, 32, 1}, Case{1, 200, 64, 2}}) {
    Tensor qkv = randn({c.B, c.T, 3 * c.C}, c.T + c.C, 1.f);
    Tensor gy = randn({c.B, c.T, c.C}, 7);
    std::vector<double> gref;
    std::vector<double> yref = naiveAttention(qkv, c.H, &gy, &gref);
    Variable x(qkv, true);
    Variable y = causalSelfAttention(x, c.H);
    ASSERT_EQ(y.shape(), (Shape{c.B, c.T, c.C}));
    const std::string what = "T=" + std::to_string(c.T) + " C=" + std::to_string(c.C);
    expectNear(y.data().data<float>(), yref, 2e-5, ("y " + what).c_str());
    y.backward(gy);
    expectNear(x.grad().data<float>(), gref, 2e-5, ("gqkv " + what).c_str());
  }
}

// --precision bf16: the tile products take bf16 operands (8-bit mantissas) with
// fp32 accumulation, so outputs and gradients match the double reference to
// bf16's resolution (~2^-8 relative per operand), not fp32's; and the fp32 path
// is not what ran (the results differ from it).
TEST(GptOps, AttentionInBf16MatchesTheReferenceToBf16Resolution) {
  struct Case { int64_t B, T, C, H; };
  for (Case c : {Case{2, 5, 16, 4}, Case{2, 65, 24, 3}, Case{1, 130, 32, 1}}) {
    Tensor qkv = randn({c.B, c.T, 3 * c.C}, c.T + c.C, 1.f);
    Tensor gy = randn({c.B, c.T, c.C}, 7);
    std::vector<double> gref;
    std::vector<double> yref = naiveAttention(qkv, c.H, &gy, &gref);
    auto run = [&](Precision p) {
      PrecisionScope scope(p);
      Variable x(qkv, true);
      Variable y = causalSelfAttention(x, c.H);
      y.backward(gy);
      return std::make_pair(y.data().toVector(), x.grad().toVector());
    };
    const auto bf16 = run(Precision::BF16), fp32 = run(Precision::FP32);
    const std::string what = "T=" + std::to_string(c.T) + " C=" + std::to_string(c.C);
    expectNear(bf16.first.data(), yref, 3e-2, ("bf16 y " + what).c_str());
    expectNear(bf16.second.data(), gref, 3e-2, ("bf16 gqkv " + what).c_str());
    EXPECT_NE(bf16.first, fp32.first) << what;
    EXPECT_NE(bf16.second, fp32.second) << what;
  }
}

TEST(GptOps, AttentionIsTheSameOnSeveralThreads) {
  // (batch, head) pairs are split over threads, each with its own score tiles.
  Tensor qkv = randn({3, 70, 48}, 4), gy = randn({3, 70, 16}, 5);
  auto run = [&](int threads) {
    setNumThreads(threads);
    Variable x(qkv, true);
    Variable y = causalSelfAttention(x, 4);
    y.backward(gy);
    setNumThreads(1);
    return std::make_pair(y.data().toVector(), x.grad().toVector());
  };
  auto one = run(1), three = run(3);
  EXPECT_EQ(one.first, three.first);
  EXPECT_EQ(one.second, three.second);
}

TEST(GptOps, AttentionGradCheck) {
  expectGrad([](auto& v) { return causalSelfAttention(v[0], 2); }, {randn({2, 5, 24}, 1)});
  expectGrad([](auto& v) { return causalSelfAttention(v[0], 1); }, {randn({1, 3, 6}, 2)});
  // Across tile boundaries (T = 67 > 64).
  expectGrad([](auto& v) { return causalSelfAttention(v[0], 2); }, {randn({1, 67, 12}, 3, 0.5f)});
}

TEST(GptOps, AttentionIsCausalAndChecksShapes) {
  // Changing the last position changes no earlier output.
  Tensor a = randn({1, 6, 12}, 1), b = a.clone();
  for (int64_t c = 0; c < 12; ++c) b.data<float>()[5 * 12 + c] += 1.f;
  Tensor ya = causalSelfAttention(Variable(a), 2).data(), yb = causalSelfAttention(Variable(b), 2).data();
  for (int64_t i = 0; i < 5 * 4; ++i) EXPECT_EQ(ya.data<float>()[i], yb.data<float>()[i]) << i;
  EXPECT_THROW(causalSelfAttention(Variable(randn({1, 6, 12}, 1)), 3), Error);  // C=4, 3 heads
  EXPECT_THROW(causalSelfAttention(Variable(randn({6, 12}, 1)), 2), Error);
}

TEST(GptOps, FastErfMatchesStdErf) {
  double worst = 0;
  for (float x = -8.f; x <= 8.f; x += 1.3e-4f) {
    const double ref = std::erf(static_cast<double>(x));
    if (ref == 0) continue;
    worst = std::max(worst, std::abs(kernels::detail::fastErf(x) - ref) / std::abs(ref));
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(kernels::detail::fastErf(INFINITY), 1.f);
  EXPECT_EQ(kernels::detail::fastErf(-INFINITY), -1.f);
  EXPECT_TRUE(std::isnan(kernels::detail::fastErf(NAN)));
}

TEST(GptOps, GeluKernelMatchesExactForm) {
  const int64_t n = 1460;
  Tensor xt = Tensor::empty({n}), yt = Tensor::empty({n}), gt = Tensor::empty({n});
  Tensor ones = Tensor::full({n}, 1.f);
  float *x = xt.data<float>(), *y = yt.data<float>(), *gx = gt.data<float>();
  for (int64_t i = 0; i < n; ++i) x[i] = -10.f + 0.0137f * static_cast<float>(i);
  kernels::gelu(x, y, n);
  kernels::geluBackward(x, ones.data<float>(), gx, n);
  // The training form gives the same values and derivatives (up to rounding).
  Tensor y2 = Tensor::empty({n}), d2 = Tensor::empty({n});
  kernels::geluWithDerivative(x, y2.data<float>(), d2.data<float>(), n);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(y2.data<float>()[i], y[i], 1e-7 * (1 + std::abs(y[i]))) << x[i];
    EXPECT_NEAR(d2.data<float>()[i], gx[i], 1e-7 * (1 + std::abs(gx[i]))) << x[i];
  }
  for (int64_t i = 0; i < n; ++i) {
    const double u = x[i], cdf = 0.5 * (1 + std::erf(u / std::sqrt(2.0)));
    const double dref = cdf + u * std::exp(-0.5 * u * u) / std::sqrt(2 * M_PI);
    EXPECT_NEAR(y[i], u * cdf, 1e-7 * (1 + std::abs(u))) << u;
    EXPECT_NEAR(gx[i], dref, 1e-6) << u;
  }
  expectGrad([](auto& v) { return gelu(v[0]); }, {randn({4, 9}, 5, 2.f)});
}

TEST(GptOps, ThreeDimensionalLinearLayerNormEmbedding) {
  expectGrad([](auto& v) { return linear(v[0], v[1], v[2]); },
             {randn({2, 3, 4}, 1), randn({5, 4}, 2), randn({5}, 3)});
  expectGrad([](auto& v) { return layerNorm(v[0], v[1], v[2], 1e-5f); },
             {randn({2, 3, 6}, 4), randn({6}, 5), randn({6}, 6)});
  // Repeated tokens: the gradient of a row is the sum over its uses (scatter-add).
  Tensor idx = Tensor::fromInts({1, 3, 1, 0, 3, 3}, {2, 3});
  expectGrad([&](auto& v) { return embedding(idx, v[0]); }, {randn({5, 4}, 7)});
  Variable w(randn({5, 4}, 8), true);
  sum(embedding(idx, w)).backward();
  EXPECT_EQ(w.grad().at({3, 0}), 3.f);
  EXPECT_EQ(w.grad().at({1, 2}), 2.f);
  EXPECT_EQ(w.grad().at({2, 1}), 0.f);
}

TEST(GptOps, CrossEntropyOverBatchAndTime) {
  // [B, T, V] logits with [B, T] targets equal the [B*T, V] form.
  Tensor logits = randn({2, 3, 7}, 1), labels = Tensor::fromInts({0, 6, 2, 2, 5, 1}, {2, 3});
  const float flat = crossEntropy(Variable(logits.view({6, 7})), labels.view({6})).item();
  EXPECT_FLOAT_EQ(crossEntropy(Variable(logits), labels).item(), flat);
  expectGrad([&](auto& v) { return crossEntropy(v[0], labels); }, {randn({2, 3, 7}, 2)});
  expectGrad([&](auto& v) { return crossEntropy(reshape(v[0], {6, 7}), labels.view({6})); },
             {randn({2, 3, 7}, 3)});
  EXPECT_THROW(crossEntropy(Variable(logits), Tensor::fromInts({0, 1}, {2})), Error);
}
