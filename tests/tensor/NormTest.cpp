// LayerNorm kernels against naive double-precision references and finite
// differences (BatchNorm's fused kernels: tests/autograd, through batchNorm2dAct).
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
