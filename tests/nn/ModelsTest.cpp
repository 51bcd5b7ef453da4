#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "nn/Init.h"
#include "nn/Models.h"

using namespace dtrain;
using namespace dtrain::nn;

namespace {
std::map<std::string, Shape> shapes(const Module& m) {
  std::map<std::string, Shape> out;
  for (auto& [n, v] : m.namedParameters()) out[n] = v.shape();
  return out;
}
}  // namespace

TEST(Models, MlpNamesMatchTorchStateDict) {
  auto m = makeModel("mlp", 0);
  std::map<std::string, Shape> expected{{"1.weight", {256, 784}}, {"1.bias", {256}},
                                        {"3.weight", {256, 256}}, {"3.bias", {256}},
                                        {"5.weight", {10, 256}},  {"5.bias", {10}}};
  EXPECT_EQ(shapes(*m), expected);
  EXPECT_EQ(m->parameterCount(), 784 * 256 + 256 + 256 * 256 + 256 + 2560 + 10);
}

TEST(Models, LenetNamesMatchTorchStateDict) {
  auto m = makeModel("lenet", 0);
  std::map<std::string, Shape> expected{
      {"0.weight", {6, 1, 5, 5}}, {"0.bias", {6}},   {"3.weight", {16, 6, 5, 5}}, {"3.bias", {16}},
      {"7.weight", {120, 400}},   {"7.bias", {120}}, {"9.weight", {84, 120}},     {"9.bias", {84}},
      {"11.weight", {10, 84}},    {"11.bias", {10}}};
  EXPECT_EQ(shapes(*m), expected);
}

TEST(Models, ForwardShapesAndDeterministicInit) {
  for (const auto& name : modelNames()) {
    auto a = makeModel(name, 5), b = makeModel(name, 5), c = makeModel(name, 6);
    Variable x(Tensor::full({3, 1, 28, 28}, 0.5f));
    EXPECT_EQ(a->forward(x).shape(), (Shape{3, 10})) << name;
    auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
    EXPECT_EQ(pa[0].data().toVector(), pb[0].data().toVector());
    EXPECT_NE(pa[0].data().toVector(), pc[0].data().toVector());
  }
  EXPECT_THROW(makeModel("resnet", 0), UsageError);
}

TEST(Models, TorchDefaultInitBounds) {
  auto m = makeModel("mlp", 1);
  auto w = m->namedParameters()[0].second.data().toVector();  // 1.weight, fan_in 784
  float bound = 1.f / std::sqrt(784.f), mx = 0;
  for (float v : w) mx = std::max(mx, std::abs(v));
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.9f * bound);
}

TEST(Layers, BatchNormBuffersAndModes) {
  BatchNorm2d bn(3);
  auto buffers = bn.namedBuffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0].first, "running_mean");
  EXPECT_EQ(buffers[2].first, "num_batches_tracked");
  Rng rng(1);
  Tensor xt = Tensor::empty({4, 3, 2, 2});
  init::normal(xt, 2.f, 1.f, rng);
  Variable y = bn.forward(Variable(xt));
  // Normalized output: channel 0 has mean ~0; the running mean moved toward 2.
  double m0 = 0;
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t s = 0; s < 4; ++s) m0 += y.data().at({n, 0, s / 2, s % 2});
  EXPECT_NEAR(m0 / 16, 0.0, 1e-5);
  EXPECT_GT(bn.runningMean->toVector()[0], 0.05f);
  EXPECT_EQ(*bn.numBatchesTracked->data<int64_t>(), 1);
  bn.eval();
  Variable z = bn.forward(Variable(xt));
  EXPECT_EQ(*bn.numBatchesTracked->data<int64_t>(), 1);
  EXPECT_NE(z.data().toVector(), y.data().toVector());
}

TEST(Layers, DropoutTrainEval) {
  Dropout d(0.5f, 3);
  Variable x(Tensor::full({1000}, 1.f));
  auto y = d.forward(x).data().toVector();
  int zeros = 0;
  for (float v : y) {
    zeros += v == 0.f;
    EXPECT_TRUE(v == 0.f || v == 2.f);
  }
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  d.eval();
  EXPECT_EQ(d.forward(x).data().toVector(), x.data().toVector());
}

TEST(Layers, SummaryListsChildren) {
  auto m = makeModel("lenet", 0);
  std::string s = m->summary();
  EXPECT_NE(s.find("(0): Conv2d(1, 6, 5, 1, 2)"), std::string::npos) << s;
  EXPECT_NE(s.find("(11): Linear(84, 10)"), std::string::npos) << s;
}

TEST(Layers, EmbeddingAndLayerNorm) {
  Rng rng(2);
  Embedding e(5, 3, rng);
  Variable out = e.lookup(Tensor::fromInts({4, 0}, {2}));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.data().at({0, 1}), e.weight.data().at({4, 1}));
  LayerNorm ln(3);
  auto y = ln.forward(out).data().toVector();
  EXPECT_NEAR(y[0] + y[1] + y[2], 0.f, 1e-5);
}

TEST(Layers, SequentialPoolsBeforeReluWithTheSameResult) {
  // Sequential runs ReLU -> MaxPool2d as MaxPool2d -> ReLU: outputs and input
  // gradients must equal the literal order.
  Rng rng(4);
  Tensor xt = Tensor::empty({2, 3, 6, 6});
  init::normal(xt, 0.f, 1.f, rng);
  Sequential seq({std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2)});
  Variable a(xt.clone(), true), b(xt.clone(), true);
  Variable ya = seq.forward(a);
  Variable yb = autograd::maxPool2d(autograd::relu(b), 2, 2);
  EXPECT_EQ(ya.data().toVector(), yb.data().toVector());
  Tensor g = Tensor::empty(ya.shape());
  init::normal(g, 0.f, 1.f, rng);
  ya.backward(g);
  yb.backward(g);
  EXPECT_EQ(a.grad().toVector(), b.grad().toVector());
}
