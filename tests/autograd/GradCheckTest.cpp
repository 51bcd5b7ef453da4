// Finite-difference gradient checks for every differentiable op.
#include <gtest/gtest.h>

#include <cmath>

#include "TestData.h"
#include "autograd/GradCheck.h"
#include "autograd/Ops.h"
#include "core/Rng.h"

using namespace dtrain;
using dtrain::test::randn;
using namespace dtrain::autograd;

namespace {


// Values bounded away from 0 (kinks of relu) by at least `gap`.
Tensor awayFromZero(const Shape& s, uint64_t seed, float gap = 0.1f) {
  Tensor t = randn(s, seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float& v = t.data<float>()[i];
    v = v >= 0 ? v + gap : v - gap;
  }
  return t;
}

// Distinct values (so max-pooling's argmax is stable under the perturbation).
Tensor distinct(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  Rng r(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.1f * static_cast<float>(i);
  for (int64_t i = t.numel() - 1; i > 0; --i) std::swap(t.data<float>()[i], t.data<float>()[r.below(i + 1)]);
  return t;
}

void expectGrad(const GradCheckFn& fn, const std::vector<Tensor>& in) {
  auto r = gradCheck(fn, in);
  EXPECT_TRUE(r.ok) << r.worst << " (error " << r.worstError << ")";
}

}  // namespace

// y = 2x whose backward is off by 10%: the checker must notice.
class WrongScaleNode final : public Node {
 public:
  const char* name() const override { return "wrong_scale"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    Tensor g = gy.clone();
    for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] *= 2.2f;
    sink.add(0, g);
  }
};

TEST(GradCheck, DetectsAWrongGradient) {
  auto r = gradCheck([](const std::vector<Variable>& v) { return scale(v[0], 2.f); },
                     {randn({3, 4}, 1)});
  EXPECT_TRUE(r.ok) << r.worst;
  auto wrong = gradCheck(
      [](const std::vector<Variable>& v) {
        Tensor y = scale(v[0], 2.f).data();
        if (!needsGraph({&v[0]})) return Variable(y);
        return record(y, std::make_shared<WrongScaleNode>(), {&v[0]});
      },
      {randn({3, 4}, 1)});
  EXPECT_FALSE(wrong.ok);
  EXPECT_NE(wrong.worst.find("input 0"), std::string::npos);
}

TEST(GradCheck, Linear) {
  expectGrad([](auto& v) { return linear(v[0], v[1], v[2]); },
             {randn({5, 7}, 1), randn({3, 7}, 2), randn({3}, 3)});
  expectGrad([](auto& v) { return linear(v[0], v[1], Variable()); }, {randn({2, 4}, 4), randn({6, 4}, 5)});
}

TEST(GradCheck, Matmul) {
  expectGrad([](auto& v) { return matmul(v[0], v[1]); }, {randn({3, 5}, 1), randn({5, 2}, 2)});
}

TEST(GradCheck, Elementwise) {
  expectGrad([](auto& v) { return add(v[0], v[1]); }, {randn({4, 3}, 1), randn({4, 3}, 2)});
  expectGrad([](auto& v) { return sub(v[0], v[1]); }, {randn({4, 3}, 1), randn({4, 3}, 2)});
  expectGrad([](auto& v) { return mul(v[0], v[1]); }, {randn({4, 3}, 1), randn({4, 3}, 2)});
  expectGrad([](auto& v) { return scale(v[0], -0.5f); }, {randn({7}, 1)});
  // The same variable used twice accumulates both contributions.
  expectGrad([](auto& v) { return mul(v[0], v[0]); }, {randn({5}, 3)});
}

TEST(GradCheck, Activations) {
  expectGrad([](auto& v) { return relu(v[0]); }, {awayFromZero({3, 5}, 1)});
  expectGrad([](auto& v) { return sigmoid(v[0]); }, {randn({3, 5}, 2)});
  expectGrad([](auto& v) { return tanh(v[0]); }, {randn({3, 5}, 3)});
  expectGrad([](auto& v) { return gelu(v[0]); }, {randn({3, 5}, 4)});
}

TEST(GradCheck, Dropout) {
  Rng shared(9);
  // The mask must be the same on every evaluation: reseed per call.
  expectGrad(
      [&](auto& v) {
        Rng r(9);
        return dropout(v[0], 0.3f, true, r);
      },
      {randn({4, 6}, 1)});
  Variable x(randn({4, 6}, 1));
  EXPECT_EQ(dropout(x, 0.5f, false, shared).data().toVector(), x.data().toVector());
}

TEST(GradCheck, ShapeAndReductions) {
  expectGrad([](auto& v) { return reshape(v[0], {6, 2}); }, {randn({3, 4}, 1)});
  expectGrad([](auto& v) { return flatten(v[0]); }, {randn({2, 3, 2, 2}, 1)});
  expectGrad([](auto& v) { return sum(v[0]); }, {randn({3, 4}, 2)});
  expectGrad([](auto& v) { return mean(v[0]); }, {randn({3, 4}, 3)});
}

TEST(GradCheck, Conv2d) {
  // Input, weight and bias; stride and padding variants; Cin > 1.
  expectGrad([](auto& v) { return conv2d(v[0], v[1], v[2], 1, 0); },
             {randn({2, 2, 5, 5}, 1), randn({3, 2, 3, 3}, 2), randn({3}, 3)});
  expectGrad([](auto& v) { return conv2d(v[0], v[1], v[2], 2, 1); },
             {randn({2, 3, 6, 5}, 4), randn({2, 3, 3, 3}, 5), randn({2}, 6)});
  expectGrad([](auto& v) { return conv2d(v[0], v[1], Variable(), 1, 2); },
             {randn({1, 1, 4, 4}, 7), randn({2, 1, 5, 5}, 8)});
  // 16 output channels from several inputs: the forward runs on oneDNN where
  // the CPU has AVX-512 (tensor/cpu/ConvDispatch.h).
  expectGrad([](auto& v) { return conv2d(v[0], v[1], v[2], 1, 1); },
             {randn({2, 2, 5, 5}, 9), randn({16, 2, 3, 3}, 10), randn({16}, 11)});
}

TEST(GradCheck, Pooling) {
  expectGrad([](auto& v) { return maxPool2d(v[0], 2, 2); }, {distinct({2, 2, 4, 6}, 1)});
  expectGrad([](auto& v) { return maxPool2d(v[0], 3, 2, 1); }, {distinct({1, 2, 5, 5}, 2)});
  expectGrad([](auto& v) { return avgPool2d(v[0], 2, 2); }, {randn({2, 2, 4, 4}, 3)});
  expectGrad([](auto& v) { return avgPool2d(v[0], 3, 1, 1); }, {randn({1, 1, 4, 5}, 4)});
}

TEST(GradCheck, Normalization) {
  Tensor rm = Tensor::zeros({3}), rv = Tensor::full({3}, 1.f);
  expectGrad([&](auto& v) { return batchNorm2d(v[0], v[1], v[2], rm, rv, true, 0.1f, 1e-5f); },
             {randn({4, 3, 2, 3}, 1), randn({3}, 2), randn({3}, 3)});
  Tensor em = randn({3}, 7), ev = Tensor::full({3}, 0.7f);
  expectGrad([&](auto& v) { return batchNorm2d(v[0], v[1], v[2], em, ev, false, 0.1f, 1e-5f); },
             {randn({2, 3, 2, 2}, 8), randn({3}, 9), randn({3}, 10)});
  expectGrad([](auto& v) { return layerNorm(v[0], v[1], v[2], 1e-5f); },
             {randn({4, 6}, 4), randn({6}, 5), randn({6}, 6)});
}

// BatchNorm fused with a residual and ReLU (ResNet's blocks), training and
// eval. The pre-activation stays at least ~0.2 from ReLU's kink under the
// perturbations: a small gamma, and a shift (beta or the residual) at least
// 0.5 away from zero.
TEST(GradCheck, BatchNormResidualRelu) {
  auto small = [](Tensor t, float s) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= s;
    return t;
  };
  Tensor rm = Tensor::zeros({3}), rv = Tensor::full({3}, 1.f);
  BatchNormSpec train;
  train.runMean = &rm;
  train.runVar = &rv;
  BatchNormSpec trainRelu = train;
  trainRelu.relu = true;
  const Tensor x = randn({3, 3, 2, 3}, 1), gamma = small(randn({3}, 2), 0.1f);
  // + residual, no ReLU
  expectGrad([&](auto& v) { return batchNorm2dAct(v[0], v[1], v[2], v[3], train); },
             {x, randn({3}, 2), randn({3}, 3), randn({3, 3, 2, 3}, 4)});
  // + residual + ReLU
  expectGrad([&](auto& v) { return batchNorm2dAct(v[0], v[1], v[2], v[3], trainRelu); },
             {x, gamma, small(randn({3}, 3), 0.05f), awayFromZero({3, 3, 2, 3}, 5, 0.5f)});
  // ReLU alone
  expectGrad([&](auto& v) { return batchNorm2dAct(v[0], v[1], v[2], Variable(), trainRelu); },
             {x, gamma, awayFromZero({3}, 6, 0.5f)});
  // eval: the running statistics, + residual + ReLU
  Tensor em = randn({3}, 7), ev = Tensor::full({3}, 0.7f);
  BatchNormSpec evalRelu;
  evalRelu.runMean = &em;
  evalRelu.runVar = &ev;
  evalRelu.training = false;
  evalRelu.relu = true;
  expectGrad([&](auto& v) { return batchNorm2dAct(v[0], v[1], v[2], v[3], evalRelu); },
             {x, gamma, small(randn({3}, 8), 0.05f), awayFromZero({3, 3, 2, 3}, 9, 0.5f)});
}

TEST(GradCheck, GlobalAvgPool) {
  expectGrad([](auto& v) { return globalAvgPool2d(v[0]); }, {randn({2, 3, 3, 4}, 1)});
}

TEST(GradCheck, SoftmaxAndLosses) {
  expectGrad([](auto& v) { return softmax(v[0]); }, {randn({3, 5}, 1)});
  expectGrad([](auto& v) { return logSoftmax(v[0]); }, {randn({3, 5}, 2)});
  Tensor labels = Tensor::fromInts({0, 4, 2}, {3});
  expectGrad([&](auto& v) { return crossEntropy(v[0], labels); }, {randn({3, 5}, 3)});
  Tensor target = randn({3, 4}, 4);
  expectGrad([&](auto& v) { return mseLoss(v[0], target); }, {randn({3, 4}, 5)});
}

TEST(GradCheck, Embedding) {
  Tensor idx = Tensor::fromInts({1, 3, 1, 0}, {2, 2});
  expectGrad([&](auto& v) { return embedding(idx, v[0]); }, {randn({5, 3}, 1)});
}

TEST(GradCheck, SmallNetworkEndToEnd) {
  Tensor labels = Tensor::fromInts({1, 0}, {2});
  expectGrad(
      [&](auto& v) {
        Variable h = maxPool2d(relu(conv2d(v[0], v[1], v[2], 1, 1)), 2, 2);
        return crossEntropy(linear(flatten(h), v[3], v[4]), labels);
      },
      {randn({2, 1, 4, 4}, 1), randn({2, 1, 3, 3}, 2, 0.5f), randn({2}, 3), randn({3, 8}, 4, 0.5f),
       randn({3}, 5)});
}

TEST(Ops, ClearErrorsOnBadShapes) {
  Variable a(randn({2, 3}, 1)), b(randn({4, 3}, 2));
  EXPECT_THROW(matmul(a, b), Error);
  EXPECT_THROW(add(a, b), Error);
  Tensor badLabels = Tensor::fromInts({0, 7}, {2});
  try {
    crossEntropy(a, badLabels);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
  }
}
