// Optimizers against the torch.optim 1.13 update rules: literal numbers worked
// out by hand for one-element parameters, and a double-precision transcription
// of the torch formulas for multi-element parameters over several steps.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/ThreadPool.h"
#include "optim/Adagrad.h"
#include "optim/Adam.h"
#include "optim/Factory.h"
#include "optim/Sgd.h"

using namespace dtrain;
using namespace dtrain::optim;
using autograd::Variable;

namespace {

Variable param(const std::vector<float>& v) {
  return Variable(Tensor::fromVector(v, {static_cast<int64_t>(v.size())}), true);
}

void setGrad(Variable& v, const std::vector<float>& g) {
  v.grad() = Tensor::fromVector(g, {static_cast<int64_t>(g.size())});
}

// Runs `grads.size()` steps of `opt` on a single parameter "w" starting at p0
// and returns the parameter after each step.
std::vector<std::vector<float>> run(Optimizer& opt, const std::vector<std::vector<float>>& grads) {
  std::vector<std::vector<float>> out;
  for (const auto& g : grads) {
    setGrad(opt.param(0), g);
    opt.step();
    out.push_back(opt.param(0).data().toVector());
  }
  return out;
}

void expectClose(const std::vector<float>& got, const std::vector<double>& want, int step) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 + 2e-6 * std::fabs(want[i]))
        << "step " << step << " element " << i;
}

const std::vector<float> kP0{1.0f, -0.5f, 2.0f, 0.25f, -3.0f};
const std::vector<std::vector<float>> kGrads{{0.5f, -1.0f, 0.1f, 2.0f, -0.3f},
                                             {0.4f, 0.2f, -0.7f, 1.5f, 0.0f},
                                             {-0.2f, 0.9f, 0.3f, -1.0f, 0.6f},
                                             {1.1f, -0.4f, 0.05f, 0.3f, -2.0f}};

// torch.optim.SGD 1.13 (_single_tensor_sgd) in double.
std::vector<std::vector<double>> refSgd(double lr, double mom, double damp, bool nesterov,
                                        double wd) {
  std::vector<double> p(kP0.begin(), kP0.end()), buf(p.size());
  std::vector<std::vector<double>> out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    for (size_t j = 0; j < p.size(); ++j) {
      double d = kGrads[s][j];
      if (wd != 0) d += wd * p[j];
      if (mom != 0) {
        buf[j] = s == 0 ? d : buf[j] * mom + (1 - damp) * d;
        d = nesterov ? d + mom * buf[j] : buf[j];
      }
      p[j] -= lr * d;
    }
    out.push_back(p);
  }
  return out;
}

// torch.optim.Adam / AdamW 1.13 (_single_tensor_adam / _single_tensor_adamw) in double.
std::vector<std::vector<double>> refAdam(double lr, double b1, double b2, double eps, double wd,
                                         bool decoupled) {
  std::vector<double> p(kP0.begin(), kP0.end()), m(p.size()), v(p.size());
  std::vector<std::vector<double>> out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    const double step = static_cast<double>(s + 1);
    for (size_t j = 0; j < p.size(); ++j) {
      double g = kGrads[s][j];
      if (decoupled)
        p[j] *= 1 - lr * wd;
      else if (wd != 0)
        g += wd * p[j];
      m[j] = m[j] * b1 + (1 - b1) * g;
      v[j] = v[j] * b2 + (1 - b2) * g * g;
      const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
      const double denom = std::sqrt(v[j]) / std::sqrt(bc2) + eps;
      p[j] -= lr / bc1 * m[j] / denom;
    }
    out.push_back(p);
  }
  return out;
}

// torch.optim.Adagrad 1.13 (_single_tensor_adagrad) in double.
std::vector<std::vector<double>> refAdagrad(double lr, double lrDecay, double wd, double init,
                                            double eps) {
  std::vector<double> p(kP0.begin(), kP0.end()), sum(p.size(), init);
  std::vector<std::vector<double>> out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    const double clr = lr / (1 + static_cast<double>(s) * lrDecay);
    for (size_t j = 0; j < p.size(); ++j) {
      double g = kGrads[s][j];
      if (wd != 0) g += wd * p[j];
      sum[j] += g * g;
      p[j] -= clr * g / (std::sqrt(sum[j]) + eps);
    }
    out.push_back(p);
  }
  return out;
}

void expectRun(Optimizer& opt, const std::vector<std::vector<double>>& want) {
  auto got = run(opt, kGrads);
  for (size_t s = 0; s < want.size(); ++s) expectClose(got[s], want[s], static_cast<int>(s + 1));
}

std::vector<std::string> stateNames(Optimizer& opt) {
  std::vector<std::string> names;
  for (auto& [n, t] : opt.namedState()) names.push_back(n);
  return names;
}

}  // namespace

// ---- hand-computed single-element steps ----

TEST(Sgd, PlainStepsByHand) {
  Sgd opt({{"w", param({1.0f})}}, {.lr = 0.1});
  auto p = run(opt, {{1.0f}, {0.5f}, {-1.0f}});
  EXPECT_FLOAT_EQ(p[0][0], 0.9f);
  EXPECT_FLOAT_EQ(p[1][0], 0.85f);
  EXPECT_FLOAT_EQ(p[2][0], 0.95f);
}

TEST(Sgd, MomentumBufferStartsAtTheGradientByHand) {
  // buf: 1, 0.9*1 + 0.5 = 1.4, 0.9*1.4 - 1 = 0.26
  Sgd opt({{"w", param({1.0f})}}, {.lr = 0.1, .momentum = 0.9});
  auto p = run(opt, {{1.0f}, {0.5f}, {-1.0f}});
  EXPECT_FLOAT_EQ(p[0][0], 0.9f);
  EXPECT_FLOAT_EQ(p[1][0], 0.76f);
  EXPECT_FLOAT_EQ(p[2][0], 0.734f);
}

TEST(Sgd, NesterovByHand) {
  // d = g + 0.9*buf: 1.9, 0.5 + 1.26 = 1.76, -1 + 0.234 = -0.766
  Sgd opt({{"w", param({1.0f})}}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  auto p = run(opt, {{1.0f}, {0.5f}, {-1.0f}});
  EXPECT_FLOAT_EQ(p[0][0], 0.81f);
  EXPECT_FLOAT_EQ(p[1][0], 0.634f);
  EXPECT_FLOAT_EQ(p[2][0], 0.7106f);
}

TEST(Sgd, WeightDecayIsAddedBeforeMomentumByHand) {
  // g' = g + 0.1 p: 1.1, 0.589, -0.92679; buf: 1.1, 1.579, 0.49431
  Sgd opt({{"w", param({1.0f})}}, {.lr = 0.1, .momentum = 0.9, .weightDecay = 0.1});
  auto p = run(opt, {{1.0f}, {0.5f}, {-1.0f}});
  EXPECT_FLOAT_EQ(p[0][0], 0.89f);
  EXPECT_FLOAT_EQ(p[1][0], 0.7321f);
  EXPECT_NEAR(p[2][0], 0.682669f, 1e-6);
}

TEST(Sgd, DampeningSkipsTheFirstStepByHand) {
  // buf: 1 (undamped), 0.9 + 0.5*0.5 = 1.15, 1.035 - 0.5 = 0.535
  Sgd opt({{"w", param({1.0f})}}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  auto p = run(opt, {{1.0f}, {0.5f}, {-1.0f}});
  EXPECT_FLOAT_EQ(p[0][0], 0.9f);
  EXPECT_FLOAT_EQ(p[1][0], 0.785f);
  EXPECT_FLOAT_EQ(p[2][0], 0.7315f);
}

TEST(Adam, ConstantGradientMovesByLrEachStepByHand) {
  // With a constant gradient the bias-corrected moments are exactly g and g^2,
  // so each step moves by lr * g / (|g| + eps).
  Adam opt({{"w", param({1.0f})}}, {.lr = 0.1});
  auto p = run(opt, {{2.0f}, {2.0f}, {2.0f}});
  EXPECT_NEAR(p[0][0], 0.9f, 1e-6);
  EXPECT_NEAR(p[1][0], 0.8f, 1e-6);
  EXPECT_NEAR(p[2][0], 0.7f, 1e-6);
}

TEST(AdamW, DecaysTheWeightsBeforeTheMomentsByHand) {
  // p *= 1 - 0.1*0.5 = 0.95, then -0.1 per step: 0.85, 0.7075, 0.572125
  AdamW opt({{"w", param({1.0f})}}, {.lr = 0.1, .weightDecay = 0.5});
  auto p = run(opt, {{2.0f}, {2.0f}, {2.0f}});
  EXPECT_NEAR(p[0][0], 0.85f, 1e-6);
  EXPECT_NEAR(p[1][0], 0.7075f, 1e-6);
  EXPECT_NEAR(p[2][0], 0.572125f, 1e-6);
}

TEST(Adagrad, StepsByHand) {
  // sum: 1, 5, 6; p: 1 - 0.1, - 0.2/sqrt(5), + 0.1/sqrt(6)
  Adagrad opt({{"w", param({1.0f})}}, {.lr = 0.1});
  auto p = run(opt, {{1.0f}, {2.0f}, {-1.0f}});
  EXPECT_FLOAT_EQ(p[0][0], 0.9f);
  EXPECT_NEAR(p[1][0], 0.9 - 0.2 / std::sqrt(5.0), 1e-6);
  EXPECT_NEAR(p[2][0], 0.9 - 0.2 / std::sqrt(5.0) + 0.1 / std::sqrt(6.0), 1e-6);
}

TEST(Adagrad, LrDecayByHand) {
  // clr = lr / (1 + (step - 1) * lr_decay): 0.1, 0.1/1.5, 0.1/2
  Adagrad opt({{"w", param({1.0f})}}, {.lr = 0.1, .lrDecay = 0.5});
  auto p = run(opt, {{1.0f}, {2.0f}, {-1.0f}});
  const double p2 = 0.9 - 0.1 / 1.5 * 2 / std::sqrt(5.0);
  EXPECT_FLOAT_EQ(p[0][0], 0.9f);
  EXPECT_NEAR(p[1][0], p2, 1e-6);
  EXPECT_NEAR(p[2][0], p2 + 0.05 / std::sqrt(6.0), 1e-6);
}

// ---- multi-element, four steps, against the torch formulas in double ----

TEST(Sgd, MatchesTorchFormulas) {
  struct Case { double mom, damp; bool nesterov; double wd; };
  for (Case c : {Case{0, 0, false, 0}, Case{0, 0, false, 0.01}, Case{0.9, 0, false, 0},
                 Case{0.9, 0.1, false, 0.05}, Case{0.5, 0, true, 0}, Case{0.9, 0, true, 0.01}}) {
    SCOPED_TRACE(testing::Message() << "momentum " << c.mom << " dampening " << c.damp
                                    << " nesterov " << c.nesterov << " wd " << c.wd);
    Sgd opt({{"w", param(kP0)}}, {.lr = 0.05, .momentum = c.mom, .dampening = c.damp,
                                  .nesterov = c.nesterov, .weightDecay = c.wd});
    expectRun(opt, refSgd(0.05, c.mom, c.damp, c.nesterov, c.wd));
  }
}

TEST(Adam, MatchesTorchFormulas) {
  for (double wd : {0.0, 0.1}) {
    SCOPED_TRACE(testing::Message() << "wd " << wd);
    Adam opt({{"w", param(kP0)}}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                                   .weightDecay = wd});
    expectRun(opt, refAdam(0.01, 0.8, 0.99, 1e-6, wd, false));
  }
}

TEST(AdamW, MatchesTorchFormulas) {
  for (double wd : {0.0, 0.01, 0.3}) {
    SCOPED_TRACE(testing::Message() << "wd " << wd);
    AdamW opt({{"w", param(kP0)}}, {.lr = 0.02, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                    .weightDecay = wd});
    expectRun(opt, refAdam(0.02, 0.9, 0.999, 1e-8, wd, true));
  }
}

TEST(Adagrad, MatchesTorchFormulas) {
  for (double wd : {0.0, 0.1}) {
    for (double init : {0.0, 0.5}) {
      SCOPED_TRACE(testing::Message() << "wd " << wd << " init " << init);
      Adagrad opt({{"w", param(kP0)}}, {.lr = 0.1, .lrDecay = 0.01, .weightDecay = wd,
                                        .initialAccumulatorValue = init, .eps = 1e-10});
      expectRun(opt, refAdagrad(0.1, 0.01, wd, init, 1e-10));
    }
  }
}

TEST(Optimizer, SetLrChangesTheNextStep) {
  Sgd opt({{"w", param({1.0f})}}, {.lr = 0.1});
  setGrad(opt.param(0), {1.0f});
  opt.step();
  opt.setLr(0.5);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.5);
  opt.step();
  EXPECT_FLOAT_EQ(opt.param(0).data().item(), 0.4f);
  EXPECT_THROW(opt.setLr(-1), UsageError);
  EXPECT_THROW(opt.setLr(std::nan("")), UsageError);
}

// ---- state, subsets, grads ----

TEST(Optimizer, StateNamesPerParameter) {
  auto params = [] { return NamedParameters{{"0.weight", param({1, 2})}, {"0.bias", param({3})}}; };
  Sgd plain(params(), {.lr = 0.1});
  Sgd momentum(params(), {.lr = 0.1, .momentum = 0.9});
  Adam adam(params(), {});
  AdamW adamw(params());
  Adagrad adagrad(params(), {});
  for (Optimizer* o : std::vector<Optimizer*>{&plain, &momentum, &adam, &adamw, &adagrad}) {
    EXPECT_TRUE(o->namedState().empty()) << o->name();  // lazily allocated
    EXPECT_EQ(o->stateBytes(), 0);
  }
  plain.ensureState();
  momentum.ensureState();
  adam.ensureState();
  adamw.ensureState();
  adagrad.ensureState();
  using V = std::vector<std::string>;
  EXPECT_EQ(stateNames(plain), (V{"0.weight.step", "0.bias.step"}));
  EXPECT_EQ(stateNames(momentum), (V{"0.weight.step", "0.weight.momentum_buffer", "0.bias.step",
                                     "0.bias.momentum_buffer"}));
  const V adamNames{"0.weight.step", "0.weight.exp_avg", "0.weight.exp_avg_sq", "0.bias.step",
                    "0.bias.exp_avg", "0.bias.exp_avg_sq"};
  EXPECT_EQ(stateNames(adam), adamNames);
  EXPECT_EQ(stateNames(adamw), adamNames);
  EXPECT_EQ(stateNames(adagrad), (V{"0.weight.step", "0.weight.sum", "0.bias.step", "0.bias.sum"}));
  // Shapes and fresh values: step 0 (I64 [1]), slots shaped like the parameter.
  for (auto& [n, t] : adagrad.namedState()) {
    if (n.ends_with(".step")) {
      EXPECT_EQ(t->dtype(), DType::I64);
      EXPECT_EQ(t->shape(), (Shape{1}));
      EXPECT_EQ(*t->data<int64_t>(), 0);
    }
  }
  EXPECT_EQ(adam.stateBytes(), 2 * 8 + 2 * 3 * 4);
}

TEST(Optimizer, StateAfterStepsHasTheSameNamesAsEnsureState) {
  NamedParameters ps{{"a", param({1, 2})}, {"b", param({3})}};
  Adam stepped(ps, {});
  for (size_t i = 0; i < 2; ++i) setGrad(stepped.param(i), i == 0 ? std::vector<float>{1, 1}
                                                                  : std::vector<float>{1});
  stepped.step();
  Adam fresh({{"a", param({1, 2})}, {"b", param({3})}}, {});
  fresh.ensureState();
  EXPECT_EQ(stateNames(stepped), stateNames(fresh));
  EXPECT_EQ(stepped.stepCount(), 1);
  for (auto& [n, t] : stepped.namedState()) {
    if (n.ends_with(".step")) {
      EXPECT_EQ(*t->data<int64_t>(), 1);
    }
  }
}

// A checkpoint copies namedState() into a fresh optimizer: its next steps must
// be bitwise identical to the original's.
TEST(Optimizer, RestoredStateContinuesBitwiseIdentically) {
  OptimizerOptions options;
  options.lr = 0.05;
  for (const std::string name : {"sgd", "adam", "adamw", "adagrad", "lars", "lamb"}) {
    SCOPED_TRACE(name);
    OptimizerOptions o = options;
    if (name == "sgd" || name == "lars") o.momentum = 0.9;
    auto a = makeOptimizer(name, {{"w", param(kP0)}}, o);
    for (int s = 0; s < 2; ++s) {
      setGrad(a->param(0), kGrads[s]);
      a->step();
    }
    auto b = makeOptimizer(name, {{"w", param(a->param(0).data().toVector())}}, o);
    b->ensureState();
    auto sa = a->namedState(), sb = b->namedState();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t k = 0; k < sa.size(); ++k) {
      ASSERT_EQ(sa[k].first, sb[k].first);
      sb[k].second->copyFrom(*sa[k].second);
    }
    b->setStepCount(a->stepCount());
    for (int s = 2; s < 4; ++s) {
      setGrad(a->param(0), kGrads[s]);
      setGrad(b->param(0), kGrads[s]);
      a->step();
      b->step();
    }
    EXPECT_EQ(a->param(0).data().toVector(), b->param(0).data().toVector());
    EXPECT_EQ(b->stepCount(), 4);
  }
}

TEST(Optimizer, SkipsParametersWithoutGradient) {
  Sgd opt({{"a", param({1})}, {"b", param({2})}}, {.lr = 0.1, .momentum = 0.9});
  setGrad(opt.param(0), {1});
  opt.step();
  EXPECT_FLOAT_EQ(opt.param(0).data().item(), 0.9f);
  EXPECT_FLOAT_EQ(opt.param(1).data().item(), 2.0f);
  EXPECT_TRUE(opt.hasState(0));
  EXPECT_FALSE(opt.hasState(1));  // like torch: no state until the first update
}

// ZeRO shards the update: two optimizers each updating half of the parameters
// must give exactly what one optimizer updating all of them gives.
TEST(Optimizer, ShardedStepsEqualAFullStep) {
  auto make = [] {
    return std::make_unique<Adam>(
        NamedParameters{{"a", param(kP0)}, {"b", param({1, 2, 3})}, {"c", param({-1})}},
        AdamOptions{.lr = 0.01, .weightDecay = 0.1});
  };
  auto full = make(), shard0 = make(), shard1 = make();
  shard0->ensureState({0, 2});
  EXPECT_EQ(stateNames(*shard0), (std::vector<std::string>{"a.step", "a.exp_avg", "a.exp_avg_sq",
                                                           "c.step", "c.exp_avg", "c.exp_avg_sq"}));
  for (int s = 0; s < 3; ++s) {
    for (Optimizer* o : {full.get(), shard0.get(), shard1.get()}) {
      setGrad(o->param(0), kGrads[s]);
      setGrad(o->param(1), {0.1f * s, -0.2f, 0.3f});
      setGrad(o->param(2), {1.0f + s});
    }
    full->step();
    shard0->step({0, 2});
    shard1->step({1});
  }
  EXPECT_EQ(full->param(0).data().toVector(), shard0->param(0).data().toVector());
  EXPECT_EQ(full->param(2).data().toVector(), shard0->param(2).data().toVector());
  EXPECT_EQ(full->param(1).data().toVector(), shard1->param(1).data().toVector());
  EXPECT_FALSE(shard1->hasState(0));
  EXPECT_EQ(shard0->param(1).data().toVector(), (std::vector<float>{1, 2, 3}));  // not owned
  EXPECT_THROW(full->step({3}), Error);
}

TEST(Optimizer, ZeroGradZeroesInPlace) {
  Sgd opt({{"w", param({1, 2})}}, {.lr = 0.1});
  setGrad(opt.param(0), {3, 4});
  const float* before = opt.param(0).grad().data<float>();
  opt.zeroGrad();
  EXPECT_EQ(opt.param(0).grad().toVector(), (std::vector<float>{0, 0}));
  EXPECT_EQ(opt.param(0).grad().data<float>(), before);
}

TEST(Optimizer, LargeParametersGiveTheSameResultOnManyThreads) {
  const int64_t n = (int64_t{1} << 17) + 3;  // several pool grains plus a tail
  std::vector<float> p0(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p0[i] = std::sin(0.001f * i);
    g[i] = std::cos(0.003f * i);
  }
  std::vector<float> results[2];
  for (int t : {1, 2}) {
    setNumThreads(t);
    Adam opt({{"w", Variable(Tensor::fromVector(p0, {n}), true)}}, {.lr = 0.01});
    for (int s = 0; s < 2; ++s) {
      opt.param(0).grad() = Tensor::fromVector(g, {n});
      opt.step();
    }
    results[t - 1] = opt.param(0).data().toVector();
  }
  setNumThreads(1);
  EXPECT_EQ(results[0], results[1]);
}

TEST(Optimizer, RejectsBadParameters) {
  EXPECT_THROW(Sgd({{"w", param({1})}, {"w", param({2})}}, {}), Error);  // duplicate name
  EXPECT_THROW(Sgd({{"", param({1})}}, {}), Error);
  Sgd opt({{"w", param({1, 2})}}, {});
  setGrad(opt.param(0), {1, 2, 3});
  try {
    opt.step();
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient of w has shape [3]"), std::string::npos)
        << e.what();
  }
}

// ---- factory ----

namespace {
std::string factoryError(const std::string& name, const OptimizerOptions& o) {
  try {
    makeOptimizer(name, {{"w", param({1})}}, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
}  // namespace

TEST(Factory, BuildsEveryOptimizerWithTorchDefaults) {
  for (const auto& name : optimizerNames()) {
    auto o = makeOptimizer(name, {{"w", param({1})}});
    EXPECT_EQ(o->name(), name);
  }
  EXPECT_DOUBLE_EQ(makeOptimizer("adam", {})->lr(), 1e-3);
  EXPECT_DOUBLE_EQ(makeOptimizer("adagrad", {})->lr(), 1e-2);
  auto adamw = makeOptimizer("adamw", {});
  EXPECT_DOUBLE_EQ(dynamic_cast<Adam&>(*adamw).options().weightDecay, 1e-2);
  auto adam = makeOptimizer("adam", {});
  EXPECT_DOUBLE_EQ(dynamic_cast<Adam&>(*adam).options().weightDecay, 0.0);
  OptimizerOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weightDecay = 1e-4;
  auto sgd = makeOptimizer("sgd", {}, o);
  const auto& so = dynamic_cast<Sgd&>(*sgd).options();
  EXPECT_DOUBLE_EQ(so.lr, 0.05);
  EXPECT_DOUBLE_EQ(so.momentum, 0.9);
  EXPECT_TRUE(so.nesterov);
  EXPECT_DOUBLE_EQ(so.weightDecay, 1e-4);
  EXPECT_EQ(sgd->describe(), "SGD(lr=0.05, momentum=0.9, dampening=0, nesterov=true, weight_decay=0.0001)");
}

TEST(Factory, ErrorsNameTheFlag) {
  EXPECT_TRUE(contains(factoryError("rmsprop", {}), "unknown --optimizer 'rmsprop'"));
  EXPECT_TRUE(contains(factoryError("rmsprop", {}), "sgd, adam, adamw, adagrad"));
  EXPECT_TRUE(contains(factoryError("sgd", {.lr = -0.1}), "invalid --lr -0.1"));
  EXPECT_TRUE(contains(factoryError("adam", {.lr = std::nan("")}), "invalid --lr nan"));
  EXPECT_TRUE(contains(factoryError("adam", {.lr = INFINITY}), "invalid --lr inf"));
  EXPECT_TRUE(contains(factoryError("sgd", {.momentum = 1.0}), "invalid --momentum 1"));
  EXPECT_TRUE(contains(factoryError("sgd", {.momentum = -0.5}), "invalid --momentum -0.5"));
  EXPECT_TRUE(contains(factoryError("sgd", {.dampening = 2}), "invalid --dampening 2"));
  EXPECT_TRUE(contains(factoryError("sgd", {.nesterov = true}), "invalid --nesterov"));
  EXPECT_TRUE(contains(factoryError("sgd", {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                       "invalid --nesterov"));
  EXPECT_TRUE(contains(factoryError("sgd", {.weightDecay = -1}), "invalid --weight-decay -1"));
  EXPECT_TRUE(contains(factoryError("adam", {.beta1 = 1.0}), "invalid --beta1 1"));
  EXPECT_TRUE(contains(factoryError("adamw", {.beta2 = -0.1}), "invalid --beta2 -0.1"));
  EXPECT_TRUE(contains(factoryError("adam", {.eps = -1e-8}), "invalid --eps"));
  EXPECT_TRUE(contains(factoryError("adagrad", {.lrDecay = -1}), "invalid --lr-decay -1"));
  EXPECT_TRUE(contains(factoryError("adagrad", {.initialAccumulatorValue = -1}),
                       "invalid --initial-accumulator-value -1"));
  EXPECT_TRUE(contains(factoryError("adam", {.momentum = 0.9}),
                       "option --momentum does not apply to optimizer 'adam'"));
  EXPECT_TRUE(contains(factoryError("sgd", {.beta1 = 0.9}),
                       "option --beta1 does not apply to optimizer 'sgd'"));
  EXPECT_TRUE(contains(factoryError("adagrad", {.nesterov = false}), "--nesterov does not apply"));
}
