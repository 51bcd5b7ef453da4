// BatchNorm and LayerNorm kernels against naive double-precision references and
// finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "tensor/KernelTestUtil.h"
#include "tensor/cpu/Norm.h"

using namespace dtrain::kernels;
using dtrain::testutil::expectAllNear;
using dtrain::testutil::numericGrad;
using dtrain::testutil::randomVector;

namespace {

// y = (x - mean) / sqrt(var + eps) * gamma + beta over groups given by index maps.
struct Stats {
  std::vector<float> y, mean, invStd;
};

Stats naiveBatchNorm(const std::vector<float>& x, const float* gamma, const float* beta, int64_t N,
                     int64_t C, int64_t S, float eps) {
  Stats r{std::vector<float>(x.size()), std::vector<float>(C), std::vector<float>(C)};
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) m += x[(n * C + c) * S + s];
    m /= double(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) v += std::pow(x[(n * C + c) * S + s] - m, 2);
    v /= double(N * S);
    const double inv = 1 / std::sqrt(v + eps);
    r.mean[c] = float(m);
    r.invStd[c] = float(inv);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        r.y[i] = float((x[i] - m) * inv * (gamma ? gamma[c] : 1) + (beta ? beta[c] : 0));
      }
  }
  return r;
}

Stats naiveLayerNorm(const std::vector<float>& x, const float* gamma, const float* beta, int64_t R,
                     int64_t D, float eps) {
  Stats r{std::vector<float>(x.size()), std::vector<float>(R), std::vector<float>(R)};
  for (int64_t i = 0; i < R; ++i) {
    double m = 0, v = 0;
    for (int64_t d = 0; d < D; ++d) m += x[i * D + d];
    m /= double(D);
    for (int64_t d = 0; d < D; ++d) v += std::pow(x[i * D + d] - m, 2);
    v /= double(D);
    const double inv = 1 / std::sqrt(v + eps);
    r.mean[i] = float(m);
    r.invStd[i] = float(inv);
    for (int64_t d = 0; d < D; ++d)
      r.y[i * D + d] =
          float((x[i * D + d] - m) * inv * (gamma ? gamma[d] : 1) + (beta ? beta[d] : 0));
  }
  return r;
}

}  // namespace

TEST(BatchNorm, ForwardMatchesNaive) {
  const float eps = 1e-5f;
  for (int64_t N : {1, 3, 8}) {
    for (int64_t C : {1, 5}) {
      for (int64_t S : {1, 7, 49}) {
        if (N * S == 1) continue;  // variance 0: invStd = 1/sqrt(eps), still checked below
        // An offset mean checks that the variance does not cancel.
        auto x = randomVector(N * C * S, 1, 99.f, 101.f);
        auto gamma = randomVector(C, 2, 0.5f, 1.5f), beta = randomVector(C, 3);
        for (bool affine : {true, false}) {
          const float* g = affine ? gamma.data() : nullptr;
          const float* b = affine ? beta.data() : nullptr;
          Stats ref = naiveBatchNorm(x, g, b, N, C, S, eps);
          std::vector<float> y(x.size()), mean(C), inv(C);
          batchNormForwardTrain(x.data(), g, b, y.data(), mean.data(), inv.data(), N, C, S, eps);
          // (A stream, not operator+: GCC 12 -O3 warns falsely on short string concatenations.)
          std::ostringstream os;
          os << "N" << N << " C" << C << " S" << S;
          const std::string d = os.str();
          expectAllNear(y, ref.y, 2e-4, 1e-4, "bn y " + d);
          expectAllNear(mean, ref.mean, 1e-5, 1e-6, "bn mean " + d);
          expectAllNear(inv, ref.invStd, 1e-5, 1e-4, "bn invStd " + d);
        }
      }
    }
  }
}

TEST(BatchNorm, EvalUsesRunningStatistics) {
  const int64_t N = 2, C = 3, S = 5;
  auto x = randomVector(N * C * S, 4), gamma = randomVector(C, 5), beta = randomVector(C, 6);
  auto rm = randomVector(C, 7), rv = randomVector(C, 8, 0.5f, 2.f);
  std::vector<float> y(x.size()), ref(x.size());
  for (int64_t i = 0; i < N * C * S; ++i) {
    const int64_t c = (i / S) % C;
    ref[i] = float((x[i] - rm[c]) / std::sqrt(double(rv[c]) + 1e-3) * gamma[c] + beta[c]);
  }
  batchNormForwardEval(x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), y.data(), N, C, S,
                       1e-3f);
  expectAllNear(y, ref, 1e-5, 1e-5, "bn eval");
}

TEST(BatchNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 2, S = 5;
  const float eps = 1e-3f;
  auto x = randomVector(N * C * S, 9), gamma = randomVector(C, 10, 0.5f, 1.5f);
  auto beta = randomVector(C, 11), gy = randomVector(N * C * S, 12);
  std::vector<float> y(x.size()), mean(C), inv(C), gx(x.size()), gg(C), gb(C);
  batchNormForwardTrain(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), inv.data(), N,
                        C, S, eps);
  batchNormBackward(x.data(), gamma.data(), mean.data(), inv.data(), gy.data(), gx.data(),
                    gg.data(), gb.data(), N, C, S);
  auto loss = [&](const std::vector<float>& xv, const std::vector<float>& gv,
                  const std::vector<float>& bv) {
    return dtrain::testutil::dot(naiveBatchNorm(xv, gv.data(), bv.data(), N, C, S, eps).y, gy);
  };
  expectAllNear(gx,
                numericGrad(
                    x, [&](const auto& v) { return loss(v, gamma, beta); }, 1e-3f),
                2e-3, 1e-2, "bn gx");
  expectAllNear(gg,
                numericGrad(
                    gamma, [&](const auto& v) { return loss(x, v, beta); }, 1e-3f),
                2e-3, 1e-2, "bn ggamma");
  expectAllNear(gb,
                numericGrad(
                    beta, [&](const auto& v) { return loss(x, gamma, v); }, 1e-3f),
                2e-3, 1e-2, "bn gbeta");
  // Without affine parameters, gamma = 1.
  std::vector<float> gx2(x.size());
  std::vector<float> ones(C, 1.f);
  batchNormForwardTrain(x.data(), nullptr, nullptr, y.data(), mean.data(), inv.data(), N, C, S,
                        eps);
  batchNormBackward(x.data(), nullptr, mean.data(), inv.data(), gy.data(), gx2.data(), nullptr,
                    nullptr, N, C, S);
  auto zeros = std::vector<float>(C, 0.f);
  expectAllNear(gx2,
                numericGrad(
                    x, [&](const auto& v) { return loss(v, ones, zeros); }, 1e-3f),
                2e-3, 1e-2, "bn gx (no affine)");
}

TEST(LayerNorm, ForwardMatchesNaive) {
  for (int64_t R : {1, 4, 33}) {
    for (int64_t D : {2, 17, 64, 100}) {
      auto x = randomVector(R * D, 13, -3.f, 5.f), gamma = randomVector(D, 14),
           beta = randomVector(D, 15);
      for (bool affine : {true, false}) {
        const float* g = affine ? gamma.data() : nullptr;
        const float* b = affine ? beta.data() : nullptr;
        Stats ref = naiveLayerNorm(x, g, b, R, D, 1e-5f);
        std::vector<float> y(x.size()), mean(R), inv(R);
        layerNormForward(x.data(), g, b, y.data(), mean.data(), inv.data(), R, D, 1e-5f);
        expectAllNear(y, ref.y, 1e-5, 1e-4, "ln y");
        expectAllNear(mean, ref.mean, 1e-6, 1e-6, "ln mean");
        expectAllNear(inv, ref.invStd, 1e-6, 1e-5, "ln invStd");
      }
    }
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t R = 3, D = 7;
  const float eps = 1e-3f;
  auto x = randomVector(R * D, 16), gamma = randomVector(D, 17, 0.5f, 1.5f);
  auto beta = randomVector(D, 18), gy = randomVector(R * D, 19);
  std::vector<float> y(x.size()), mean(R), inv(R), gx(x.size()), gg(D, 9.f), gb(D, 9.f);
  layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), inv.data(), R, D,
                   eps);
  layerNormBackward(x.data(), gamma.data(), mean.data(), inv.data(), gy.data(), gx.data(),
                    gg.data(), gb.data(), R, D);
  auto loss = [&](const std::vector<float>& xv, const std::vector<float>& gv,
                  const std::vector<float>& bv) {
    return dtrain::testutil::dot(naiveLayerNorm(xv, gv.data(), bv.data(), R, D, eps).y, gy);
  };
  expectAllNear(gx,
                numericGrad(
                    x, [&](const auto& v) { return loss(v, gamma, beta); }, 1e-3f),
                2e-3, 1e-2, "ln gx");
  expectAllNear(gg,
                numericGrad(
                    gamma, [&](const auto& v) { return loss(x, v, beta); }, 1e-3f),
                2e-3, 1e-2, "ln ggamma");
  expectAllNear(gb,
                numericGrad(
                    beta, [&](const auto& v) { return loss(x, gamma, v); }, 1e-3f),
                2e-3, 1e-2, "ln gbeta");
}
