#include <gtest/gtest.h>

#include <cmath>

#include "calibrate/Calibrate.h"
#include "calibrate/CommProbe.h"
#include "calibrate/Fit.h"
#include "core/Error.h"

namespace dtrain::calibrate {
namespace {

std::vector<Sample> synthetic(double alpha, double beta, double noise = 0) {
  std::vector<Sample> out;
  int i = 0;
  for (double b = 4096; b <= 16 << 20; b *= 4, ++i) {
    const double wobble = noise * (i % 2 ? 1 : -1);  // deterministic +-noise
    out.push_back({b, (alpha + b / beta) * (1 + wobble)});
  }
  return out;
}

TEST(AlphaBetaFit, RecoversExactAlphaAndBeta) {
  for (auto [alpha, beta] : {std::pair{5e-6, 8e9}, {2e-4, 1.25e7}, {1e-3, 6e6}}) {
    const AlphaBeta f = fitAlphaBeta(synthetic(alpha, beta));
    EXPECT_NEAR(f.alphaS, alpha, alpha * 1e-6);
    EXPECT_NEAR(f.bytesPerS, beta, beta * 1e-6);
    EXPECT_NEAR(f.seconds(1 << 20), alpha + (1 << 20) / beta, 1e-12);
  }
}

TEST(AlphaBetaFit, NoisyPointsStayClose) {
  const AlphaBeta f = fitAlphaBeta(synthetic(2e-4, 1.25e7, 0.02));
  EXPECT_NEAR(f.bytesPerS, 1.25e7, 1.25e7 * 0.05);
  EXPECT_NEAR(f.alphaS, 2e-4, 2e-4 * 0.1);
}

TEST(AlphaBetaFit, KeepsBothPositiveOnBadData) {
  // Points on a line with a negative intercept (-0.1 ms at 1 GB/s, a token
  // bucket's burst): the rate stays, alpha becomes half the smallest time.
  std::vector<Sample> s;
  for (double b : {1 << 20, 4 << 20, 16 << 20}) s.push_back({b, -1e-4 + b / 1e9});
  AlphaBeta f = fitAlphaBeta(s);
  EXPECT_NEAR(f.bytesPerS, 1e9, 1e9 * 1e-6);
  EXPECT_NEAR(f.alphaS, s[0].seconds / 2, 1e-12);
  // Flat (noise only): a slope <= 0 becomes the largest sample's rate.
  f = fitAlphaBeta({{4096, 2e-3}, {65536, 1.9e-3}, {1 << 20, 1.8e-3}});
  EXPECT_GT(f.alphaS, 0);
  EXPECT_NEAR(f.bytesPerS, (1 << 20) / 1.8e-3, 1);
  // A cache cliff: small messages fast, the largest out of cache: the rate is
  // the large messages' (what a big gradient bucket gets).
  f = fitAlphaBeta({{4096, 1e-4}, {65536, 1.1e-4}, {1 << 20, 3e-4}, {4 << 20, 1e-3}, {16 << 20, 6e-3}});
  EXPECT_LT(f.bytesPerS, (16 << 20) / 5e-3);
}

TEST(AlphaBetaFit, RefusesTooFewSizesAndBadSamples) {
  EXPECT_THROW(fitAlphaBeta({{4096, 1e-5}}), Error);
  EXPECT_THROW(fitAlphaBeta({{4096, 1e-5}, {4096, 2e-5}}), Error);
  EXPECT_THROW(fitAlphaBeta({{4096, 0}, {8192, 1e-5}}), Error);
  EXPECT_THROW(fitAlphaBeta({{4096, NAN}, {8192, 1e-5}}), Error);
}

TEST(Calibrate, MedianSizesAndRates) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(messageSizes(4096, 65536), (std::vector<size_t>{4096, 16384, 65536}));
  EXPECT_EQ(messageSizes(4096, 4096).size(), 2u);
  EXPECT_DOUBLE_EQ(rateBytesPerS("100mbit"), 12.5e6);
  EXPECT_DOUBLE_EQ(rateBytesPerS("1gbit"), 125e6);
  EXPECT_DOUBLE_EQ(rateBytesPerS("12.5mbps"), 12.5e6);
  EXPECT_EQ(rateBytesPerS("fast"), 0);
}

}  // namespace
}  // namespace dtrain::calibrate
