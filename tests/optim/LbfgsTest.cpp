// L-BFGS (optim/Lbfgs.h): the two-loop direction against the BFGS inverse-Hessian
// update written out as 2x2 matrices, and convergence on a convex problem
// (L2-regularised logistic regression) against SGD with the same evaluations.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "optim/Factory.h"
#include "optim/Lbfgs.h"
#include "optim/Sgd.h"

using namespace dtrain;
using namespace dtrain::optim;
using autograd::Variable;

namespace {

// H_{k+1} = (I - rho s y^T) H_k (I - rho y s^T) + rho s s^T, for 2x2 matrices.
using M2 = std::array<std::array<double, 2>, 2>;
M2 bfgsUpdate(const M2& h, const std::vector<float>& s, const std::vector<float>& y) {
  const double rho = 1.0 / (s[0] * y[0] + s[1] * y[1]);
  M2 a{}, b{}, out{};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) a[i][j] = (i == j) - rho * s[i] * y[j];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) b[i][j] += a[i][k] * h[k][j];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 2; ++k) out[i][j] += b[i][k] * a[j][k];  // (I - rho y s^T) = a^T
      out[i][j] += rho * s[i] * s[j];
    }
  return out;
}

TEST(Lbfgs, TwoLoopDirectionEqualsTheBfgsMatrixOnAQuadratic) {
  // f(x) = 1/2 x^T A x, A = [[3, 1], [1, 2]]: y = A s.
  auto times = [](const std::vector<float>& v) {
    return std::vector<float>{3 * v[0] + v[1], v[0] + 2 * v[1]};
  };
  std::deque<std::vector<float>> s{{1.0f, 0.0f}, {0.5f, -1.0f}}, y{times(s[0]), times(s[1])};
  const std::vector<float> g{0.7f, -0.3f};
  // torch's H_diag: y.s / y.y of the newest pair.
  const double ys = y[1][0] * s[1][0] + y[1][1] * s[1][1];
  const double yy = y[1][0] * y[1][0] + y[1][1] * y[1][1];
  const double hDiag = ys / yy;
  M2 h{{{hDiag, 0}, {0, hDiag}}};
  for (size_t k = 0; k < s.size(); ++k) h = bfgsUpdate(h, s[k], y[k]);
  const std::vector<float> d = lbfgsDirection(g, s, y, hDiag);
  ASSERT_EQ(d.size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(d[i], -(h[i][0] * g[0] + h[i][1] * g[1]), 1e-6) << i;
  // The newest pair's secant equation holds: H y = s, i.e. the direction for g = -y is s.
  const auto secant = lbfgsDirection({-y[1][0], -y[1][1]}, s, y, hDiag);
  EXPECT_NEAR(secant[0], s[1][0], 1e-6);
  EXPECT_NEAR(secant[1], s[1][1], 1e-6);
  // No history: steepest descent.
  const auto d0 = lbfgsDirection(g, {}, {}, 1.0);
  EXPECT_FLOAT_EQ(d0[0], -g[0]);
  EXPECT_FLOAT_EQ(d0[1], -g[1]);
}

// L2-regularised logistic regression on a fixed synthetic set: loss and
// gradient by hand into w's .grad.
struct LogReg {
  int n = 256, dim = 8;
  double lambda = 1e-2;
  std::vector<float> x;
  std::vector<int> y;
  LogReg() {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    x.resize(n * dim);
    for (auto& v : x) v = normal(rng);
    // Features on scales from 1/27 to 9: an ill-conditioned problem, where
    // SGD's step is bounded by the steepest direction.
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < dim; ++j) x[i * dim + j] *= static_cast<float>(std::pow(3.0, j - 3));
    for (int i = 0; i < n; ++i) {
      double z = 0;
      for (int j = 0; j < dim; ++j) z += x[i * dim + j] * (j % 3 - 1.0);
      y.push_back(z + 0.5 * normal(rng) > 0);
    }
  }
  double evaluate(Variable& w) const {
    const float* p = w.data().data<float>();
    std::vector<float> g(dim, 0.0f);
    double loss = 0;
    for (int i = 0; i < n; ++i) {
      double z = 0;
      for (int j = 0; j < dim; ++j) z += x[i * dim + j] * p[j];
      const double prob = 1 / (1 + std::exp(-z));
      loss += std::log1p(std::exp(-std::fabs(z))) + std::max(z, 0.0) - y[i] * z;
      for (int j = 0; j < dim; ++j) g[j] += static_cast<float>((prob - y[i]) * x[i * dim + j] / n);
    }
    loss /= n;
    for (int j = 0; j < dim; ++j) {
      loss += 0.5 * lambda * p[j] * p[j];
      g[j] += static_cast<float>(lambda * p[j]);
    }
    w.grad() = Tensor::fromVector(g, {dim});
    return loss;
  }
  static double gradNorm(const Variable& w) {
    double s = 0;
    for (float v : w.grad().toVector()) s += double(v) * v;
    return std::sqrt(s);
  }
};

TEST(Lbfgs, ConvergesOnLogisticRegressionMuchFasterThanSgd) {
  LogReg problem;
  auto fresh = [&] { return Variable(Tensor::zeros({problem.dim}, DType::F32), true); };
  // L-BFGS: 40 iterations (most evaluate the loss once more, in the line search).
  Variable w = fresh();
  auto lbfgs = makeOptimizer("lbfgs", {{"w", w}}, OptimizerOptions{.lr = 1.0});
  int evaluations = 0;
  double loss = problem.evaluate(w);
  for (int it = 0; it < 40; ++it) {
    lbfgs->setLossClosure([&] { ++evaluations; return problem.evaluate(w); }, loss);
    lbfgs->step();
    loss = problem.evaluate(w);
    if (std::getenv("LBFGS_TRACE"))
      std::printf("it %d loss %.9f |g| %.3g t %g evals %d\n", it, loss, LogReg::gradNorm(w),
                  static_cast<Lbfgs&>(*lbfgs).lastStepLength(), static_cast<Lbfgs&>(*lbfgs).lastEvaluations());
  }
  const double lbfgsLoss = loss, lbfgsGrad = LogReg::gradNorm(w);
  // SGD (momentum 0.9, the largest stable lr of 0.1, 0.03, 0.01 ...) with ten
  // times the evaluations L-BFGS used.
  Variable v = fresh();
  OptimizerOptions so;
  so.lr = 0.01;
  so.momentum = 0.9;
  auto sgd = makeOptimizer("sgd", {{"w", v}}, so);
  double sgdLoss = 0;
  for (int it = 0; it < 10 * (evaluations + 40); ++it) {
    sgdLoss = problem.evaluate(v);
    sgd->step();
  }
  sgdLoss = problem.evaluate(v);
  const double sgdGrad = LogReg::gradNorm(v);
  std::printf("L-BFGS: loss %.9f |g| %.3g after %d evaluations; SGD: loss %.9f |g| %.3g\n",
              lbfgsLoss, lbfgsGrad, evaluations, sgdLoss, sgdGrad);
  // The optimum's loss, to float resolution: a long L-BFGS run.
  Variable u = fresh();
  auto longRun = makeOptimizer("lbfgs", {{"w", u}}, OptimizerOptions{.lr = 1.0});
  double best = problem.evaluate(u);
  for (int it = 0; it < 150; ++it) {
    longRun->setLossClosure([&] { return problem.evaluate(u); }, best);
    longRun->step();
    best = std::min(best, problem.evaluate(u));
  }
  std::printf("optimum %.9f: gap L-BFGS %.3g, SGD %.3g\n", best, lbfgsLoss - best, sgdLoss - best);
  EXPECT_LT(lbfgsGrad, 1e-2 * 14) << "L-BFGS did not approach the optimum (loss " << lbfgsLoss << ")";
  EXPECT_LT(lbfgsLoss - best, 1e-5);
  EXPECT_GT(sgdLoss - best, 10 * (lbfgsLoss - best));
  EXPECT_LE(evaluations, 80);
  EXPECT_EQ(lbfgs->stepCount(), 40);
}

// The history is the optimizer's global state: a fresh L-BFGS given it takes
// bitwise the step the original takes; an incomplete or foreign one is refused.
TEST(Lbfgs, HistoryAsGlobalStateContinuesBitwise) {
  LogReg problem;
  Variable w(Tensor::zeros({problem.dim}, DType::F32), true);
  auto a = makeOptimizer("lbfgs", {{"w", w}}, OptimizerOptions{.lr = 1.0});
  double loss = problem.evaluate(w);
  for (int it = 0; it < 5; ++it) {
    a->setLossClosure([&] { return problem.evaluate(w); }, loss);
    a->step();
    loss = problem.evaluate(w);
  }
  std::map<std::string, Tensor> saved;
  for (auto& [k, t] : a->globalState()) saved.emplace(k, t);
  ASSERT_EQ(saved.size(), 2 * static_cast<Lbfgs&>(*a).historySize());
  ASSERT_GE(saved.size(), 2u);
  const Tensor start = w.data().clone();

  Variable v(start.clone(), true);
  auto b = makeOptimizer("lbfgs", {{"w", v}}, OptimizerOptions{.lr = 1.0});
  EXPECT_TRUE(b->checkGlobalState(saved).empty());
  b->setGlobalState(saved);
  double lossV = problem.evaluate(v);
  a->setLossClosure([&] { return problem.evaluate(w); }, loss);
  a->step();
  b->setLossClosure([&] { return problem.evaluate(v); }, lossV);
  b->step();
  EXPECT_EQ(w.data().toVector(), v.data().toVector());

  auto incomplete = saved;
  incomplete.erase("lbfgs@y.0");
  EXPECT_FALSE(b->checkGlobalState(incomplete).empty());
  auto foreign = saved;
  foreign["lbfgs@s.0"] = Tensor::zeros({problem.dim + 1}, DType::F32);
  ASSERT_FALSE(b->checkGlobalState(foreign).empty());
  EXPECT_NE(b->checkGlobalState(foreign)[0].find("L-BFGS expects F32"), std::string::npos);
  // Other optimizers keep none.
  auto sgd = makeOptimizer("sgd", {{"w", v}}, OptimizerOptions{.lr = 0.1});
  EXPECT_TRUE(sgd->globalState().empty());
  EXPECT_FALSE(sgd->checkGlobalState(saved).empty());
}

TEST(Lbfgs, RefusesAStepWithoutAClosureAndOptionsItHasNot) {
  Variable w(Tensor::zeros({2}, DType::F32), true);
  auto opt = makeOptimizer("lbfgs", {{"w", w}}, {});
  EXPECT_TRUE(opt->needsLossClosure());
  w.grad() = Tensor::fromVector(std::vector<float>{1.0f, 1.0f}, {2});
  EXPECT_ANY_THROW(opt->step());
  OptimizerOptions o;
  o.momentum = 0.9;
  EXPECT_THROW(makeOptimizer("lbfgs", {{"w", w}}, o), UsageError);
  OptimizerOptions h;
  h.lbfgsHistory = 0;
  EXPECT_THROW(makeOptimizer("lbfgs", {{"w", w}}, h), UsageError);
}

}  // namespace
