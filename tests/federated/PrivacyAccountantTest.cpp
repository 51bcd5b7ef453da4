// The RDP accountant against published figures: TF Privacy's README (MNIST DP-SGD
// tutorial, N = 60000, batch 256, delta = 1e-5) lists epsilon 3.01 for noise 1.1 and
// 60 epochs, 1.19 for noise 1.3 and 15 epochs, 7.10 for noise 0.7 and 45 epochs, as
// compute_dp_sgd_privacy.py computes them (steps = ceil(epochs N / batch), the
// classic RDP -> (eps, delta) conversion, orders 1.1..10.9 and 12..63).
#include <gtest/gtest.h>

#include <cmath>

#include "federated/PrivacyAccountant.h"

namespace dtrain::federated {
namespace {

double tfPrivacyEpsilon(double noise, int epochs, Conversion conversion) {
  const double q = 256.0 / 60000.0;
  const auto steps = static_cast<int64_t>(std::ceil(epochs * 60000.0 / 256.0));
  RdpAccountant accountant;
  accountant.step(q, noise, steps);
  return accountant.epsilon(1e-5, conversion);
}

TEST(PrivacyAccountant, MatchesTfPrivacyPublishedEpsilons) {
  EXPECT_NEAR(tfPrivacyEpsilon(1.1, 60, Conversion::Classic), 3.01, 0.006);
  EXPECT_NEAR(tfPrivacyEpsilon(1.3, 15, Conversion::Classic), 1.19, 0.006);
  EXPECT_NEAR(tfPrivacyEpsilon(0.7, 45, Conversion::Classic), 7.10, 0.006);
}

TEST(PrivacyAccountant, ImprovedConversionIsTighter) {
  for (double noise : {0.7, 1.1, 1.3}) {
    const double classic = tfPrivacyEpsilon(noise, 30, Conversion::Classic);
    const double improved = tfPrivacyEpsilon(noise, 30, Conversion::Improved);
    EXPECT_LT(improved, classic);
    EXPECT_GT(improved, 0.8 * classic);
  }
}

TEST(PrivacyAccountant, FullSamplingIsTheGaussianMechanism) {
  // q = 1: RDP of the Gaussian mechanism, alpha / (2 z^2), at every order.
  for (double alpha : {1.5, 2.0, 7.0, 32.0})
    EXPECT_DOUBLE_EQ(rdpSampledGaussian(1.0, 2.0, alpha), alpha / 8.0);
  // For q < 1 the sampled mechanism is cheaper, and RDP grows with q and alpha.
  EXPECT_LT(rdpSampledGaussian(0.1, 2.0, 8.0), 1.0);
  EXPECT_LT(rdpSampledGaussian(0.01, 1.0, 8.0), rdpSampledGaussian(0.02, 1.0, 8.0));
  EXPECT_LT(rdpSampledGaussian(0.01, 1.0, 4.0), rdpSampledGaussian(0.01, 1.0, 8.0));
}

TEST(PrivacyAccountant, FractionalOrdersAreContinuousWithIntegerOnes) {
  // The fractional series and the integer binomial expansion agree near an integer.
  for (double alpha : {2.0, 3.0, 10.0}) {
    const double atInt = rdpSampledGaussian(0.05, 1.2, alpha);
    EXPECT_NEAR(rdpSampledGaussian(0.05, 1.2, alpha + 1e-6), atInt, 1e-5 * atInt + 1e-9);
  }
}

TEST(PrivacyAccountant, EpsilonGrowsWithSteps) {
  RdpAccountant a;
  double last = 0;
  for (int round = 0; round < 5; ++round) {
    a.step(0.1, 1.0, 10);
    const double eps = a.epsilon(1e-5);
    EXPECT_GT(eps, last);
    last = eps;
  }
}

}  // namespace
}  // namespace dtrain::federated
