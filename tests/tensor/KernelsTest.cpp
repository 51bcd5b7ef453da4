// GEMM, elementwise, reduction and softmax kernels against naive references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/Error.h"
#include "core/ThreadPool.h"
#include "tensor/KernelTestUtil.h"
#include "tensor/cpu/Blas.h"
#include "tensor/cpu/Elementwise.h"
#include "tensor/cpu/Reduce.h"
#include "tensor/cpu/Softmax.h"

using namespace dtrain;
using namespace dtrain::kernels;
using dtrain::testutil::expectAllNear;
using dtrain::testutil::randomVector;

namespace {

// Sizes around the vector widths (8, 16), 0 and 1, and one above the parallel grain.
const int64_t kSizes[] = {0, 1, 7, 15, 16, 17, 33, 255, 1000, 70001};

}  // namespace

TEST(Gemm, MatchesNaiveForAllTransposes) {
  struct Case {
    int64_t M, N, K;
  };
  for (Case c : {Case{1, 1, 1}, Case{7, 13, 5}, Case{33, 17, 65}, Case{2, 100, 3}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        // Padded leading dimensions catch stride mix-ups.
        const int64_t lda = (ta ? c.M : c.K) + 3, ldb = (tb ? c.K : c.N) + 2, ldc = c.N + 1;
        auto A = randomVector((ta ? c.K : c.M) * lda, 1);
        auto B = randomVector((tb ? c.N : c.K) * ldb, 2);
        auto C = randomVector(c.M * ldc, 3);
        auto ref = C;
        const float alpha = 0.7f, beta = -0.3f;
        for (int64_t i = 0; i < c.M; ++i)
          for (int64_t j = 0; j < c.N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < c.K; ++k)
              s += double(ta ? A[k * lda + i] : A[i * lda + k]) *
                   (tb ? B[j * ldb + k] : B[k * ldb + j]);
            ref[i * ldc + j] = float(alpha * s + beta * C[i * ldc + j]);
          }
        gemm(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
        expectAllNear(C, ref, 1e-5, 1e-5, "gemm " + std::to_string(ta) + std::to_string(tb));
      }
  }
}

TEST(Gemm, EmptySizesDoNotCallBlas) {
  std::vector<float> C = {1.f, 2.f, std::numeric_limits<float>::quiet_NaN(), 4.f};
  gemm(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  EXPECT_EQ(C[0], 0.5f);
  EXPECT_EQ(C[1], 1.f);
  gemm(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.f, C.data(), 2);
  EXPECT_EQ(C[2], 0.f);  // beta == 0 clears NaN, as BLAS does
  gemm(false, false, 0, 2, 3, 1.f, nullptr, 3, nullptr, 2, 0.f, nullptr, 2);
  gemm(false, false, 2, 0, 3, 1.f, nullptr, 3, nullptr, 1, 0.f, nullptr, 1);
  setBlasThreads(1);
}

TEST(Elementwise, BinaryAndScalarOps) {
  for (int64_t n : kSizes) {
    auto a = randomVector(n, 10), b = randomVector(n, 11, 0.5f, 2.f);
    std::vector<float> out(n), ref(n);
    auto check = [&](const char* what, auto f) {
      for (int64_t i = 0; i < n; ++i) ref[i] = f(a[i], b[i]);
      expectAllNear(out, ref, 1e-6, 1e-6, std::string(what) + " n=" + std::to_string(n));
    };
    add(a.data(), b.data(), out.data(), n);
    check("add", [](float u, float v) { return u + v; });
    sub(a.data(), b.data(), out.data(), n);
    check("sub", [](float u, float v) { return u - v; });
    mul(a.data(), b.data(), out.data(), n);
    check("mul", [](float u, float v) { return u * v; });
    scale(a.data(), 2.5f, out.data(), n);
    check("scale", [](float u, float) { return 2.5f * u; });
    out = b;
    axpy(3.f, a.data(), out.data(), n);
    check("axpy", [](float u, float v) { return v + 3.f * u; });
  }
}

TEST(Elementwise, InPlaceAndMultiThreaded) {
  const int64_t n = 200003;
  auto a = randomVector(n, 12), b = randomVector(n, 13);
  std::vector<float> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = a[i] + b[i];
  setNumThreads(2);
  auto x = a;
  add(x.data(), b.data(), x.data(), n);  // out aliases the first input
  setNumThreads(1);
  expectAllNear(x, ref, 0, 0, "in-place add, 2 threads");
  x = a;
  relu(x.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) ref[i] = a[i] > 0 ? a[i] : 0.f;
  expectAllNear(x, ref, 0, 0, "in-place relu");
}

TEST(Elementwise, ActivationsMatchStdMath) {
  for (int64_t n : kSizes) {
    // Wide range: exercises the saturated tails and the small-|x| tanh branch.
    auto x = randomVector(n, 20, -12.f, 12.f);
    for (int64_t i = 0; i < n; i += 3) x[i] *= 0.05f;
    std::vector<float> y(n), ref(n);
    const std::string sz = " n=" + std::to_string(n);
    relu(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ref[i] = std::max(x[i], 0.f);
    expectAllNear(y, ref, 0, 0, "relu" + sz);
    sigmoid(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ref[i] = float(1.0 / (1.0 + std::exp(-double(x[i]))));
    expectAllNear(y, ref, 1e-7, 2e-6, "sigmoid" + sz);
    kernels::tanh(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ref[i] = float(std::tanh(double(x[i])));
    expectAllNear(y, ref, 1e-7, 2e-6, "tanh" + sz);
    gelu(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ref[i] = float(0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))));
    expectAllNear(y, ref, 1e-6, 2e-6, "gelu" + sz);
  }
}

TEST(Elementwise, ActivationEdgeValues) {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {-inf, -1000.f, -88.f, -87.f, 0.f, -0.f, 87.f, 89.f, 1000.f, inf, nan};
  const int64_t n = int64_t(x.size());
  std::vector<float> y(n);
  sigmoid(x.data(), y.data(), n);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[4], 0.5f);
  EXPECT_EQ(y[8], 1.f);
  EXPECT_EQ(y[9], 1.f);
  EXPECT_TRUE(std::isnan(y[10]));
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_NEAR(y[i], 1.0 / (1.0 + std::exp(-double(x[i]))), 1e-7) << x[i];
  kernels::tanh(x.data(), y.data(), n);
  EXPECT_EQ(y[0], -1.f);
  EXPECT_EQ(y[9], 1.f);
  EXPECT_EQ(y[4], 0.f);
  EXPECT_TRUE(std::isnan(y[10]));
  relu(x.data(), y.data(), n);
  EXPECT_TRUE(std::isnan(y[10]));
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[9], inf);
}

TEST(Elementwise, ActivationBackwardMatchesDerivative) {
  for (int64_t n : kSizes) {
    auto x = randomVector(n, 30, -4.f, 4.f), gy = randomVector(n, 31);
    std::vector<float> y(n), gx(n), ref(n);
    const std::string sz = " n=" + std::to_string(n);
    relu(x.data(), y.data(), n);
    reluBackward(y.data(), gy.data(), gx.data(), n);
    for (int64_t i = 0; i < n; ++i) ref[i] = x[i] > 0 ? gy[i] : 0.f;
    expectAllNear(gx, ref, 0, 0, "reluBackward" + sz);
    sigmoid(x.data(), y.data(), n);
    sigmoidBackward(y.data(), gy.data(), gx.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double s = 1.0 / (1.0 + std::exp(-double(x[i])));
      ref[i] = float(gy[i] * s * (1 - s));
    }
    expectAllNear(gx, ref, 1e-6, 1e-5, "sigmoidBackward" + sz);
    kernels::tanh(x.data(), y.data(), n);
    tanhBackward(y.data(), gy.data(), gx.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double t = std::tanh(double(x[i]));
      ref[i] = float(gy[i] * (1 - t * t));
    }
    expectAllNear(gx, ref, 1e-6, 1e-5, "tanhBackward" + sz);
    geluBackward(x.data(), gy.data(), gx.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // Finite difference of the exact GELU in double.
      auto g = [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };
      ref[i] = float(gy[i] * (g(x[i] + 1e-4) - g(x[i] - 1e-4)) / 2e-4);
    }
    expectAllNear(gx, ref, 1e-5, 1e-4, "geluBackward" + sz);
  }
}

TEST(Elementwise, RowSums) {
  for (int64_t rows : {0, 1, 3, 64}) {
    for (int64_t cols : {1, 10, 17, 120}) {
      auto y = randomVector(rows * cols, 40);
      std::vector<float> out(cols, 5.f), sref(cols, 0.f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) sref[c] += y[r * cols + c];
      sumRows(y.data(), out.data(), rows, cols, false);
      expectAllNear(out, sref, 1e-5, 1e-5, "sumRows");
      sumRows(y.data(), out.data(), rows, cols, true);
      for (auto& v : sref) v *= 2;
      expectAllNear(out, sref, 1e-5, 1e-5, "sumRows accumulate");
    }
  }
}

TEST(Reduce, Sums) {
  for (int64_t n : kSizes) {
    auto x = randomVector(n, 50, -2.f, 3.f);
    double s = 0;
    for (float v : x) s += v;
    EXPECT_NEAR(sum(x.data(), n), s, 1e-6 * (1 + n)) << n;
  }
}

TEST(Reduce, ArgmaxRowsFirstMaximumWins) {
  std::vector<float> x = {1,  3,  3,  2,  // tie: first of the two 3s
                          -5, -6, -7, -8, 0, 0, 0, 0};
  std::vector<int32_t> out(3);
  argmaxRows(x.data(), 3, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 0, 0}));
  for (int64_t cols : {1, 10, 33}) {
    auto y = randomVector(7 * cols, 51);
    std::vector<int32_t> got(7);
    argmaxRows(y.data(), 7, cols, got.data());
    for (int64_t r = 0; r < 7; ++r) {
      int64_t best = 0;
      for (int64_t c = 1; c < cols; ++c)
        if (y[r * cols + c] > y[r * cols + best]) best = c;
      EXPECT_EQ(got[r], best);
    }
  }
}

namespace {

std::vector<float> naiveSoftmax(const std::vector<float>& x, int64_t rows, int64_t cols, bool log) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -1e300, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]));
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] =
          float(log ? x[r * cols + c] - m - std::log(s) : std::exp(x[r * cols + c] - m) / s);
  }
  return y;
}

}  // namespace

TEST(Softmax, ForwardMatchesNaive) {
  for (int64_t rows : {0, 1, 3, 64}) {
    for (int64_t cols : {1, 2, 10, 17, 1000}) {
      auto x = randomVector(rows * cols, 60, -30.f, 30.f);
      std::vector<float> y(x.size());
      softmaxRows(x.data(), y.data(), rows, cols);
      expectAllNear(y, naiveSoftmax(x, rows, cols, false), 1e-7, 2e-6, "softmax");
      logSoftmaxRows(x.data(), y.data(), rows, cols);
      expectAllNear(y, naiveSoftmax(x, rows, cols, true), 2e-5, 1e-6, "logSoftmax");
      auto z = x;  // in place
      softmaxRows(z.data(), z.data(), rows, cols);
      expectAllNear(z, naiveSoftmax(x, rows, cols, false), 1e-7, 2e-6, "softmax in place");
    }
  }
  // Huge logits must not overflow.
  std::vector<float> big = {1e30f, 0.f, -1e30f}, y(3);
  softmaxRows(big.data(), y.data(), 1, 3);
  EXPECT_EQ(y, (std::vector<float>{1.f, 0.f, 0.f}));
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, cols = 7;
  auto x = randomVector(rows * cols, 61, -2.f, 2.f), gy = randomVector(rows * cols, 62);
  for (bool log : {false, true}) {
    std::vector<float> y(x.size()), gx(x.size());
    (log ? logSoftmaxRows : softmaxRows)(x.data(), y.data(), rows, cols);
    (log ? logSoftmaxBackward : softmaxBackward)(y.data(), gy.data(), gx.data(), rows, cols);
    auto num = testutil::numericGrad(
        x,
        [&](const std::vector<float>& v) {
          return testutil::dot(naiveSoftmax(v, rows, cols, log), gy);
        },
        1e-2f);
    expectAllNear(gx, num, 1e-3, 1e-2, log ? "logSoftmaxBackward" : "softmaxBackward");
  }
}

TEST(CrossEntropy, ForwardBackwardMatchNaive) {
  for (int64_t rows : {1, 5, 64}) {
    for (int64_t cols : {1, 10, 19}) {
      auto x = randomVector(rows * cols, 70, -5.f, 5.f);
      std::vector<int32_t> labels(rows);
      for (int64_t r = 0; r < rows; ++r) labels[r] = int32_t((r * 7 + 3) % cols);
      std::vector<float> probs(x.size()), gx(x.size());
      const double loss = crossEntropyForward(x.data(), labels.data(), probs.data(), rows, cols);
      auto logp = naiveSoftmax(x, rows, cols, true);
      double ref = 0;
      for (int64_t r = 0; r < rows; ++r) ref -= logp[r * cols + labels[r]];
      EXPECT_NEAR(loss, ref / rows, 1e-5);
      expectAllNear(probs, naiveSoftmax(x, rows, cols, false), 1e-7, 2e-6, "probs");
      crossEntropyBackward(probs.data(), labels.data(), 2.f / rows, gx.data(), rows, cols);
      auto num = testutil::numericGrad(
          x,
          [&](const std::vector<float>& v) {
            auto lp = naiveSoftmax(v, rows, cols, true);
            double l = 0;
            for (int64_t r = 0; r < rows; ++r) l -= lp[r * cols + labels[r]];
            return 2.0 * l / rows;  // gradOfLoss = 2
          },
          1e-2f);
      expectAllNear(gx, num, 1e-4, 1e-2, "crossEntropyBackward");
    }
  }
}

TEST(CrossEntropy, ExtremeLogitsGiveFiniteLoss) {
  std::vector<float> x = {-1000.f, 1000.f}, probs(2);
  std::vector<int32_t> label = {0};
  EXPECT_NEAR(crossEntropyForward(x.data(), label.data(), probs.data(), 1, 2), 2000.0, 1e-3);
}

TEST(CrossEntropy, LabelOutOfRangeNamesRowAndLabel) {
  std::vector<float> x(3 * 4, 0.f), probs(12);
  for (int32_t bad : {4, -1}) {
    std::vector<int32_t> labels = {0, 3, bad};
    try {
      crossEntropyForward(x.data(), labels.data(), probs.data(), 3, 4);
      FAIL() << "no error for label " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("label " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
    }
  }
}
