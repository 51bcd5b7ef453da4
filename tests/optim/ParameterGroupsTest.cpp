// --decay-2d-only: nanoGPT's AdamW groups (decay matrices, not biases or norm weights).
#include <gtest/gtest.h>

#include "optim/Factory.h"

using namespace dtrain;

namespace {

optim::NamedParameters matrixAndBias() {
  autograd::Variable w(Tensor::full({2, 3}, 1.0f), true), b(Tensor::full({3}, 1.0f), true);
  w.setGradBuffer(Tensor::zeros({2, 3}));
  b.setGradBuffer(Tensor::zeros({3}));
  return {{"w", w}, {"b", b}};
}

}  // namespace

TEST(ParameterGroups, Decay2dOnlyLeavesBiasesUndecayed) {
  for (const std::string name : {"adamw", "adam", "sgd"}) {
    auto params = matrixAndBias();
    optim::OptimizerOptions o;
    o.lr = 0.1;
    o.weightDecay = 0.5;
    o.decay2dOnly = true;
    auto opt = optim::makeOptimizer(name, params, o);
    EXPECT_TRUE(opt->decay2dOnly());
    EXPECT_TRUE(opt->decays(0));
    EXPECT_FALSE(opt->decays(1));
    opt->step();  // zero gradients: only weight decay moves a parameter
    for (float v : params[0].second.data().toVector()) EXPECT_LT(v, 1.0f) << name;
    for (float v : params[1].second.data().toVector()) EXPECT_EQ(v, 1.0f) << name;
  }
}

TEST(ParameterGroups, OffByDefaultEveryParameterDecays) {
  auto params = matrixAndBias();
  optim::OptimizerOptions o;
  o.lr = 0.1;
  o.weightDecay = 0.5;
  auto opt = optim::makeOptimizer("adamw", params, o);
  EXPECT_FALSE(opt->decay2dOnly());
  opt->step();
  for (float v : params[1].second.data().toVector()) EXPECT_LT(v, 1.0f);
}
