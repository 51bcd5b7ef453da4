// LAMB (You et al. 2019, Algorithm 2) against a hand computation of two steps
// on a two-element tensor and against the formulas in double over several
// steps; the trust-ratio edge cases, parameter groups and refused options.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "optim/Adam.h"
#include "optim/Factory.h"
#include "optim/Lamb.h"

using namespace dtrain;
using namespace dtrain::optim;
using autograd::Variable;

namespace {

Variable lambParam(const std::vector<float>& v) {
  return Variable(Tensor::fromVector(v, {static_cast<int64_t>(v.size())}), true);
}

void lambSetGrad(Variable& v, const std::vector<float>& g) {
  v.grad() = Tensor::fromVector(g, {static_cast<int64_t>(g.size())});
}

// Algorithm 2 in double: Adam's bias-corrected moments, decoupled weight decay
// added to the update, trust = ||w|| / ||u|| (1 when either is 0).
struct LambReference {
  std::vector<double> w, m, v;
  double lr, b1, b2, eps, wd;
  bool adapt = true;
  int64_t t = 0;
  void step(const std::vector<float>& g) {
    ++t;
    std::vector<double> u(w.size());
    double ww = 0, uu = 0;
    for (size_t j = 0; j < w.size(); ++j) {
      m[j] = b1 * m[j] + (1 - b1) * g[j];
      v[j] = b2 * v[j] + (1 - b2) * double(g[j]) * g[j];
      const double mh = m[j] / (1 - std::pow(b1, double(t)));
      const double vh = v[j] / (1 - std::pow(b2, double(t)));
      u[j] = mh / (std::sqrt(vh) + eps) + wd * w[j];
      ww += w[j] * w[j];
      uu += u[j] * u[j];
    }
    const double trust = adapt && ww > 0 && uu > 0 ? std::sqrt(ww) / std::sqrt(uu) : 1.0;
    for (size_t j = 0; j < w.size(); ++j) w[j] -= lr * trust * u[j];
  }
};

TEST(Lamb, TwoStepsByHand) {
  OptimizerOptions o;
  o.lr = 0.1;
  o.weightDecay = 0.1;
  o.eps = 0.0;  // so that step 1's r is exactly sign(g)
  auto lamb = makeOptimizer("lamb", {{"w", lambParam({3, 4})}}, o);
  EXPECT_STREQ(lamb->name(), "lamb");
  // Step 1: m^ = g, v^ = g^2, r = g / |g| = (1, 1); u = r + 0.1 w = (1.3, 1.4);
  // ||w|| = 5, ||u|| = sqrt(3.65): trust = 2.6171196; w -= 0.1 * trust * u.
  lambSetGrad(lamb->param(0), {0.6f, 0.8f});
  lamb->step();
  std::vector<float> w = lamb->param(0).data().toVector();
  EXPECT_NEAR(w[0], 2.6597745, 2e-6);
  EXPECT_NEAR(w[1], 3.6336033, 2e-6);
  // Step 2, g = (-0.3, 0.4): m = (0.024, 0.112), m^ = m / 0.19;
  // v = (0.00044964, 0.00079936), v^ = v / 0.001999; r = (0.2663370, 0.9321796);
  // u = r + 0.1 w1 = (0.5323145, 1.2955400); trust = ||w1|| / ||u|| = 3.2150038.
  lambSetGrad(lamb->param(0), {-0.3f, 0.4f});
  lamb->step();
  w = lamb->param(0).data().toVector();
  EXPECT_NEAR(w[0], 2.4886351, 4e-6);
  EXPECT_NEAR(w[1], 3.2170867, 4e-6);
  // The state slots, like Adam's (checkpoints save them).
  auto state = lamb->namedState();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "w.step");
  EXPECT_EQ(*state[0].second->data<int64_t>(), 2);
  EXPECT_EQ(state[1].first, "w.exp_avg");
  EXPECT_NEAR(state[1].second->toVector()[0], 0.024, 1e-7);
  EXPECT_EQ(state[2].first, "w.exp_avg_sq");
  EXPECT_NEAR(state[2].second->toVector()[1], 0.00079936, 1e-9);
}

TEST(Lamb, FollowsTheDoubleFormulasOverSteps) {
  const std::vector<float> p0 = {0.5f, -1.25f, 2.0f, 0.0f, -0.75f};
  const std::vector<std::vector<float>> grads = {{0.1f, -0.2f, 0.3f, 0.05f, -0.4f},
                                                 {-0.3f, 0.1f, 0.2f, -0.1f, 0.25f},
                                                 {0.02f, 0.4f, -0.1f, 0.3f, 0.0f},
                                                 {0.5f, -0.05f, 0.15f, -0.2f, 0.1f},
                                                 {-0.1f, -0.3f, 0.05f, 0.2f, -0.2f}};
  for (double wd : {0.0, 0.01}) {
    SCOPED_TRACE(wd);
    OptimizerOptions o;
    o.lr = 0.01;
    o.weightDecay = wd;
    o.beta1 = 0.8;
    o.beta2 = 0.99;
    auto lamb = makeOptimizer("lamb", {{"w", lambParam(p0)}}, o);
    LambReference ref{{p0.begin(), p0.end()}, std::vector<double>(5), std::vector<double>(5),
                      0.01, 0.8, 0.99, 1e-6, wd};
    for (const auto& g : grads) {
      lambSetGrad(lamb->param(0), g);
      lamb->step();
      ref.step(g);
      const auto w = lamb->param(0).data().toVector();
      for (size_t j = 0; j < w.size(); ++j) EXPECT_NEAR(w[j], ref.w[j], 1e-6) << j;
    }
  }
}

TEST(Lamb, TrustIsOneWhenTheWeightsAreZero) {
  // ||w|| = 0: the plain bias-corrected Adam direction at lr (the paper's phi(0)
  // would freeze a zero-initialized layer forever).
  OptimizerOptions o;
  o.lr = 0.1;
  o.eps = 0.0;
  auto lamb = makeOptimizer("lamb", {{"w", lambParam({0, 0})}}, o);
  lambSetGrad(lamb->param(0), {0.5f, -2.0f});
  lamb->step();
  EXPECT_NEAR(lamb->param(0).data().toVector()[0], -0.1f, 1e-7);
  EXPECT_NEAR(lamb->param(0).data().toVector()[1], 0.1f, 1e-7);
  // A zero gradient: u = 0 (no weight decay, eps > 0), nothing moves.
  o.eps.reset();
  auto still = makeOptimizer("lamb", {{"w", lambParam({1, 2})}}, o);
  lambSetGrad(still->param(0), {0, 0});
  still->step();
  EXPECT_EQ(still->param(0).data().toVector(), (std::vector<float>{1, 2}));
}

TEST(Lamb, ParametersOutsideTheDecayGroupGetNoTrustRatio) {
  // --decay-2d-only: a 1-D parameter (bias, norm weight) neither decays nor
  // adapts (an Adam step with LAMB's eps); the 2-D one does both.
  const std::vector<std::vector<float>> grads = {{0.3f, -0.1f, 0.2f, 0.4f}, {-0.2f, 0.5f, 0.1f, 0.0f}};
  OptimizerOptions o;
  o.lr = 0.05;
  o.weightDecay = 0.1;
  o.decay2dOnly = true;
  Variable matrix(Tensor::fromVector({1.0f, -2.0f, 0.5f, 3.0f}, {2, 2}), true);
  Variable bias = lambParam({1.0f, -2.0f, 0.5f, 3.0f});
  auto lamb = makeOptimizer("lamb", {{"m", matrix}, {"b", bias}}, o);
  EXPECT_FALSE(lamb->decays(1));
  LambReference adapted{{1, -2, 0.5, 3}, std::vector<double>(4), std::vector<double>(4),
                        0.05, 0.9, 0.999, 1e-6, 0.1};
  LambReference plain = adapted;
  plain.wd = 0;
  plain.adapt = false;
  for (const auto& g : grads) {
    matrix.grad() = Tensor::fromVector(g, {2, 2});
    lambSetGrad(bias, g);
    lamb->step();
    adapted.step(g);
    plain.step(g);
  }
  const auto m = matrix.data().toVector(), b = bias.data().toVector();
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(m[j], adapted.w[j], 1e-6) << j;
    EXPECT_NEAR(b[j], plain.w[j], 1e-6) << j;
  }
  // The two differ (the test can tell adapted from plain).
  EXPECT_GT(std::fabs(adapted.w[3] - plain.w[3]), 1e-3);
}

TEST(Lamb, RefusesOptionsItDoesNotHave) {
  auto error = [](const OptimizerOptions& o) -> std::string {
    try {
      makeOptimizer("lamb", {}, o);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error({.momentum = 0.9, .offloadDir = {}}), "option --momentum does not apply to optimizer 'lamb'");
  EXPECT_EQ(error({.nesterov = true, .offloadDir = {}}), "option --nesterov does not apply to optimizer 'lamb'");
  EXPECT_EQ(error({.lrDecay = 0.1, .offloadDir = {}}), "option --lr-decay does not apply to optimizer 'lamb'");
  EXPECT_EQ(error({.initialAccumulatorValue = 0.1, .offloadDir = {}}),
            "option --initial-accumulator-value does not apply to optimizer 'lamb'");
  EXPECT_NE(error({.beta1 = 1.0, .offloadDir = {}}).find("invalid --beta1 1"), std::string::npos);
  EXPECT_EQ(error({.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .offloadDir = {}}), "(no error)");
}

}  // namespace
