// Convolution and pooling kernels against direct (seven-loop) references.
#include <gtest/gtest.h>

#include <limits>
#include <sstream>
#include <string>

#include "core/ThreadPool.h"
#include "tensor/KernelTestUtil.h"
#include "tensor/cpu/Conv.h"
#include "tensor/cpu/Pool.h"

using namespace dtrain;
using namespace dtrain::kernels;
using dtrain::testutil::expectAllNear;
using dtrain::testutil::describe;
using dtrain::testutil::randomVector;

namespace {

// Calls f(n, co, oh, ow, ci, kh, kw, xIndex) for every in-bounds tap.
template <typename F>
void forEachTap(const ConvShape& s, F f) {
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t co = 0; co < s.Cout; ++co)
      for (int64_t oh = 0; oh < s.outH(); ++oh)
        for (int64_t ow = 0; ow < s.outW(); ++ow)
          for (int64_t ci = 0; ci < s.Cin; ++ci)
            for (int64_t kh = 0; kh < s.KH; ++kh)
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t ih = oh * s.strideH - s.padH + kh, iw = ow * s.strideW - s.padW + kw;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                const int64_t yi = ((n * s.Cout + co) * s.outH() + oh) * s.outW() + ow;
                const int64_t xi = ((n * s.Cin + ci) * s.H + ih) * s.W + iw;
                const int64_t wi = ((co * s.Cin + ci) * s.KH + kh) * s.KW + kw;
                f(yi, xi, wi, co);
              }
}

struct ConvRef {
  std::vector<float> y, gx, gw, gb;
};

ConvRef naiveConv(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                  const std::vector<float>& b, const std::vector<float>& gy) {
  const int64_t P = s.outH() * s.outW();
  std::vector<double> y(s.N * s.Cout * P), gx(x.size()), gw(w.size()), gb(s.Cout);
  for (int64_t i = 0; i < int64_t(y.size()); ++i) y[i] = b[(i / P) % s.Cout];
  forEachTap(s, [&](int64_t yi, int64_t xi, int64_t wi, int64_t) {
    y[yi] += double(x[xi]) * w[wi];
    gx[xi] += double(gy[yi]) * w[wi];
    gw[wi] += double(gy[yi]) * x[xi];
  });
  for (int64_t i = 0; i < int64_t(gy.size()); ++i) gb[(i / P) % s.Cout] += gy[i];
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  return {f(y), f(gx), f(gw), f(gb)};
}

const ConvShape kConvShapes[] = {
    {2, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2},    // LeNet conv1
    {19, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0},  // LeNet conv2, several gradient chunks
    {1, 3, 7, 9, 5, 3, 2, 2, 1, 1, 0},      // odd sizes, asymmetric stride/pad
    {3, 2, 8, 8, 1, 1, 1, 1, 1, 0, 0},      // 1x1
    {2, 4, 11, 10, 13, 3, 3, 3, 2, 2, 1},   // stride > 1 with padding
    {2, 3, 6, 6, 40, 3, 3, 1, 1, 1, 1},     // many output channels
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},      // one element
    {2, 2, 5, 4, 3, 5, 4, 1, 1, 0, 0},      // kernel covers the whole input
    {1, 2, 3, 3, 2, 3, 3, 2, 2, 1, 1},      // stride jumps over all but the corners
    {0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1},      // empty batch
    {2, 5, 40, 3, 7, 3, 3, 1, 1, 1, 1},     // long output rows not multiple of 16
};

void checkConv(const ConvShape& s) {
  const int64_t P = s.outH() * s.outW();
  auto x = randomVector(s.N * s.Cin * s.H * s.W, 1),
       w = randomVector(s.Cout * s.Cin * s.KH * s.KW, 2);
  auto b = randomVector(s.Cout, 3), gy = randomVector(s.N * s.Cout * P, 4);
  const ConvRef ref = naiveConv(s, x, w, b, gy);
  const std::string d = describe(s);
  const double tol = 1e-5 * (1 + s.Cin * s.KH * s.KW);
  std::vector<float> y(ref.y.size(), 99.f), gx(x.size(), 99.f), gw(w.size(), 99.f),
      gb(b.size(), 99.f);
  conv2dForward(s, x.data(), w.data(), b.data(), y.data());
  expectAllNear(y, ref.y, tol, 1e-5, "conv y " + d);
  conv2dForward(s, x.data(), w.data(), nullptr, y.data());
  auto yNoBias = ref.y;
  for (int64_t i = 0; i < int64_t(y.size()); ++i) yNoBias[i] -= b[(i / P) % s.Cout];
  expectAllNear(y, yNoBias, tol, 1e-5, "conv y (no bias) " + d);
  conv2dBackward(s, x.data(), w.data(), gy.data(), gx.data(), gw.data(), gb.data());
  const double gtol = 1e-5 * (1 + s.N * P);
  expectAllNear(gx, ref.gx, tol, 1e-5, "conv gx " + d);
  expectAllNear(gw, ref.gw, gtol, 1e-5, "conv gw " + d);
  expectAllNear(gb, ref.gb, gtol, 1e-5, "conv gbias " + d);
  // Each output is optional and overwritten, never accumulated.
  std::vector<float> gw2(w.size(), 7.f), gx2(x.size(), 7.f);
  conv2dBackward(s, x.data(), w.data(), gy.data(), nullptr, gw2.data(), nullptr);
  expectAllNear(gw2, gw, 0, 0, "conv gw alone " + d);
  conv2dBackward(s, x.data(), w.data(), gy.data(), gx2.data(), nullptr, nullptr);
  expectAllNear(gx2, gx, 0, 0, "conv gx alone " + d);
}

}  // namespace

TEST(Conv2d, ForwardBackwardMatchNaive) {
  for (const ConvShape& s : kConvShapes) checkConv(s);
}

TEST(Conv2d, MultiThreadedMatchesNaive) {
  setNumThreads(3);
  for (const ConvShape& s : kConvShapes) checkConv(s);
  checkConv({64, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0});
  setNumThreads(1);
}

TEST(Conv2d, GradientsMatchFiniteDifferences) {
  // Validates the reference semantics themselves (cross-correlation, padding).
  const ConvShape s{2, 2, 5, 4, 3, 3, 2, 2, 1, 1, 1};
  const int64_t P = s.outH() * s.outW();
  auto x = randomVector(s.N * s.Cin * s.H * s.W, 5),
       w = randomVector(s.Cout * s.Cin * s.KH * s.KW, 6);
  auto b = randomVector(s.Cout, 7), gy = randomVector(s.N * s.Cout * P, 8);
  std::vector<float> gx(x.size()), gw(w.size()), gb(b.size()), y(gy.size());
  conv2dBackward(s, x.data(), w.data(), gy.data(), gx.data(), gw.data(), gb.data());
  auto loss = [&](const std::vector<float>& xv, const std::vector<float>& wv,
                  const std::vector<float>& bv) {
    conv2dForward(s, xv.data(), wv.data(), bv.data(), y.data());
    return testutil::dot(y, gy);
  };
  expectAllNear(gx, testutil::numericGrad(x, [&](const auto& v) { return loss(v, w, b); }), 2e-3,
                1e-2, "gx");
  expectAllNear(gw, testutil::numericGrad(w, [&](const auto& v) { return loss(x, v, b); }), 2e-3,
                1e-2, "gw");
  expectAllNear(gb, testutil::numericGrad(b, [&](const auto& v) { return loss(x, w, v); }), 2e-3,
                1e-2, "gb");
}

namespace {

struct PoolRef {
  std::vector<float> y, gx;
  std::vector<int32_t> argmax;
};

PoolRef naivePool(const PoolShape& s, const std::vector<float>& x, const std::vector<float>& gy,
                  bool max) {
  const int64_t OH = s.outH(), OW = s.outW();
  PoolRef r{std::vector<float>(s.N * s.C * OH * OW), std::vector<float>(x.size(), 0.f),
            std::vector<int32_t>(s.N * s.C * OH * OW)};
  for (int64_t p = 0; p < s.N * s.C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t o = (p * OH + oh) * OW + ow;
        float best = -std::numeric_limits<float>::infinity();
        int64_t bi = -1;
        double acc = 0;
        for (int64_t kh = 0; kh < s.KH; ++kh)
          for (int64_t kw = 0; kw < s.KW; ++kw) {
            const int64_t h = oh * s.strideH - s.padH + kh, w = ow * s.strideW - s.padW + kw;
            if (h < 0 || h >= s.H || w < 0 || w >= s.W) continue;
            const float v = x[p * s.H * s.W + h * s.W + w];
            acc += v;
            if (bi < 0 || v > best) best = v, bi = h * s.W + w;
          }
        if (max) {
          r.y[o] = best;
          r.argmax[o] = int32_t(bi);
          r.gx[p * s.H * s.W + bi] += gy[o];
        } else {
          r.y[o] = float(acc / double(s.KH * s.KW));
          for (int64_t kh = 0; kh < s.KH; ++kh)
            for (int64_t kw = 0; kw < s.KW; ++kw) {
              const int64_t h = oh * s.strideH - s.padH + kh, w = ow * s.strideW - s.padW + kw;
              if (h >= 0 && h < s.H && w >= 0 && w < s.W)
                r.gx[p * s.H * s.W + h * s.W + w] += gy[o] / float(s.KH * s.KW);
            }
        }
      }
  return r;
}

const PoolShape kPoolShapes[] = {
    {64, 6, 28, 28, 2, 2, 2, 2},     // LeNet pool1 (2x2 fast path)
    {3, 16, 10, 10, 2, 2, 2, 2},     // LeNet pool2
    {2, 3, 7, 9, 2, 2, 2, 2},        // odd sizes: last row/column dropped
    {1, 1, 1, 1, 1, 1, 1, 1},        // one element
    {2, 2, 9, 8, 3, 3, 2, 2, 1, 1},  // padding
    {2, 2, 6, 7, 3, 3, 1, 1},        // overlapping windows
    {1, 3, 5, 6, 2, 3, 1, 2, 1, 1},  // rectangular
    {0, 3, 4, 4, 2, 2, 2, 2},        // empty
    {1, 2, 33, 35, 2, 2, 2, 2},      // rows longer than a vector
};

}  // namespace

TEST(Pool2d, MaxAndAvgMatchNaive) {
  for (const PoolShape& s : kPoolShapes) {
    const std::string d = "pool N" + std::to_string(s.N) + " " + std::to_string(s.H) + "x" +
                          std::to_string(s.W) + " k" + std::to_string(s.KH) + "x" +
                          std::to_string(s.KW);
    // Few distinct values: exercises ties (the first maximum wins).
    auto x = randomVector(s.N * s.C * s.H * s.W, 9);
    for (auto& v : x) v = float(int(v * 4)) / 4;
    auto gy = randomVector(s.N * s.C * s.outH() * s.outW(), 10);
    for (bool max : {true, false}) {
      PoolRef ref = naivePool(s, x, gy, max);
      std::vector<float> y(ref.y.size()), gx(x.size(), 5.f);
      std::vector<int32_t> am(ref.y.size());
      if (max) {
        maxPool2dForward(s, x.data(), y.data(), am.data());
        EXPECT_EQ(am, ref.argmax) << d;
        maxPool2dBackward(s, gy.data(), am.data(), gx.data());
      } else {
        avgPool2dForward(s, x.data(), y.data());
        avgPool2dBackward(s, gy.data(), gx.data());
      }
      expectAllNear(y, ref.y, 1e-6, 1e-6, (max ? "max y " : "avg y ") + d);
      expectAllNear(gx, ref.gx, 1e-6, 1e-6, (max ? "max gx " : "avg gx ") + d);
    }
  }
}

TEST(Pool2d, MaxPropagatesNaN) {
  const PoolShape s{1, 1, 2, 4, 2, 2, 2, 2};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {1, nan, 5, 6, 9, 2, 7, 8}, y(2);
  std::vector<int32_t> am(2);
  maxPool2dForward(s, x.data(), y.data(), am.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(am[0], 1);
  EXPECT_EQ(y[1], 8.f);
  EXPECT_EQ(am[1], 7);
  const PoolShape g{1, 1, 2, 4, 2, 3, 1, 1};  // generic path
  std::vector<float> y2(2);
  maxPool2dForward(g, x.data(), y2.data(), am.data());
  EXPECT_TRUE(std::isnan(y2[0]));
  EXPECT_TRUE(std::isnan(y2[1]));
  EXPECT_EQ(am[0], 1);
}

TEST(Pool2d, AvgBackwardMatchesFiniteDifferences) {
  const PoolShape s{1, 2, 5, 6, 3, 2, 2, 2, 1, 1};
  auto x = randomVector(s.N * s.C * s.H * s.W, 11),
       gy = randomVector(s.N * s.C * s.outH() * s.outW(), 12);
  std::vector<float> y(gy.size()), gx(x.size());
  avgPool2dBackward(s, gy.data(), gx.data());
  auto num = testutil::numericGrad(x, [&](const std::vector<float>& v) {
    avgPool2dForward(s, v.data(), y.data());
    return testutil::dot(y, gy);
  });
  expectAllNear(gx, num, 1e-3, 1e-3, "avg pool gx");
}
