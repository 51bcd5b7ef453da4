#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <set>

#include "autograd/Ops.h"
#include "nn/Init.h"
#include "nn/Models.h"
#include "nn/RecomputeModes.h"
#include "nn/ResNet.h"

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

// torch.nn.BatchNorm2d's arithmetic, from a double-precision reference: the
// output normalized by the biased batch variance, the running variance moved
// by the unbiased one with momentum 0.1; eval normalizes by the running ones.
TEST(Layers, BatchNormStatisticsAsTorch) {
  BatchNorm2d bn(2);
  Rng rng(5);
  Tensor xt = Tensor::empty({3, 2, 3, 2});
  init::normal(xt, 4.f, 2.f, rng);  // mean far from 0: the one-pass sums must not cancel
  bn.runningMean->fill(0.5f);
  bn.runningVar->fill(2.f);
  Variable y = bn.forward(Variable(xt));
  const int64_t M = 3 * 6;
  for (int64_t c = 0; c < 2; ++c) {
    double s = 0, q = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 6; ++i) s += xt.at({n, c, i / 2, i % 2});
    const double mean = s / M;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 6; ++i) q += std::pow(xt.at({n, c, i / 2, i % 2}) - mean, 2);
    const double biased = q / M, unbiased = q / (M - 1);
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 6; ++i)
        EXPECT_NEAR(y.data().at({n, c, i / 2, i % 2}),
                    (xt.at({n, c, i / 2, i % 2}) - mean) / std::sqrt(biased + 1e-5), 1e-5);
    EXPECT_NEAR(bn.runningMean->toVector()[c], 0.9 * 0.5 + 0.1 * mean, 1e-5);
    EXPECT_NEAR(bn.runningVar->toVector()[c], 0.9 * 2.0 + 0.1 * unbiased, 1e-5);
  }
  bn.eval();
  Variable z = bn.forward(Variable(xt));
  const float rm = bn.runningMean->toVector()[1], rv = bn.runningVar->toVector()[1];
  EXPECT_NEAR(z.data().at({2, 1, 2, 1}), (xt.at({2, 1, 2, 1}) - rm) / std::sqrt(rv + 1e-5f), 1e-5);
}

// The buffers are not parameters: the optimizer never sees them.
TEST(Models, ResNetNamesAndBuffersAsTorchvision) {
  auto m = buildModel("resnet-20", {}, 1);
  auto params = m->namedParameters();
  EXPECT_EQ(params.size(), 65u);
  EXPECT_EQ(params.front().first, "conv1.weight");
  EXPECT_EQ(params.back().first, "fc.bias");
  EXPECT_EQ(m->parameterCount(), 272186);  // torch_resnet.py's ResNet20 (1 channel, 10 classes)
  std::set<std::string> names;
  for (auto& [n, p] : params) names.insert(n);
  for (const char* n : {"bn1.weight", "layer1.0.conv1.weight", "layer2.0.downsample.0.weight",
                        "layer2.0.downsample.1.bias", "layer3.2.bn2.weight", "fc.weight"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_FALSE(names.count("bn1.running_mean"));
  std::set<std::string> buffers;
  for (auto& [n, t] : m->namedBuffers()) buffers.insert(n);
  EXPECT_EQ(buffers.size(), 63u);
  for (const char* n : {"bn1.running_mean", "layer1.0.bn1.running_var",
                        "layer3.0.downsample.1.num_batches_tracked"})
    EXPECT_TRUE(buffers.count(n)) << n;
  EXPECT_EQ(buildModel("resnet-56", {}, 1)->parameterCount(), 855482);  // ResNet20(n=9)
  EXPECT_THROW(buildModel("resnet-20", {}, 1, DataShape{{784}, 10}), UsageError);
}

// Recomputation re-runs a block's forward in backward: the running statistics
// and num_batches_tracked move once, as without it, and gradients are equal.
TEST(Models, ResNetRecomputeMovesRunningStatisticsOnce) {
  auto plain = buildModel("resnet-20", {}, 2), re = buildModel("resnet-20", {}, 2);
  EXPECT_GT(applyRecompute(*re, "blocks"), 0);
  Rng rng(3);
  Tensor x = Tensor::empty({2, 1, 28, 28});
  init::normal(x, 0.f, 1.f, rng);
  Tensor y = Tensor::fromInts({1, 7}, {2});
  for (auto* m : {plain.get(), re.get()})
    autograd::crossEntropy(m->forward(Variable(x)), y).backward();
  auto pb = plain->namedBuffers(), rb = re->namedBuffers();
  ASSERT_EQ(pb.size(), rb.size());
  for (size_t i = 0; i < pb.size(); ++i) {
    if (pb[i].second->dtype() == DType::I64) {
      EXPECT_EQ(*rb[i].second->data<int64_t>(), 1) << rb[i].first;
      continue;
    }
    EXPECT_EQ(pb[i].second->toVector(), rb[i].second->toVector()) << pb[i].first;
  }
  auto pp = plain->namedParameters(), rp = re->namedParameters();
  for (size_t i = 0; i < pp.size(); ++i)
    EXPECT_EQ(pp[i].second.grad().toVector(), rp[i].second.grad().toVector()) << pp[i].first;
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

// Blocked activations (the default) against every layer in NCHW: the same
// network, with BatchNorm's sums and the 1x1 shortcuts' kernels in another
// order, so equal to float rounding.
TEST(Models, ResNetBlockedActivationsMatchPlain) {
  auto blocked = buildModel("resnet-20", {}, 4), plain = buildModel("resnet-20", {}, 4);
  std::static_pointer_cast<ResNet>(plain)->setActivationFormat(MemoryFormat::Plain);
  Rng rng(5);
  Tensor x = Tensor::empty({4, 1, 12, 12});
  init::normal(x, 0.f, 1.f, rng);
  Tensor y = Tensor::fromInts({1, 7, 3, 0}, {4});
  std::vector<float> logits[2];
  int i = 0;
  for (auto* m : {plain.get(), blocked.get()}) {
    Variable out = m->forward(Variable(x));
    logits[i++] = out.data().toVector();
    autograd::crossEntropy(out, y).backward();
  }
  for (size_t k = 0; k < logits[0].size(); ++k)
    EXPECT_NEAR(logits[1][k], logits[0][k], 1e-4 * (1 + std::abs(logits[0][k])));
  auto pp = plain->namedParameters(), bp = blocked->namedParameters();
  ASSERT_EQ(pp.size(), bp.size());
  for (size_t p = 0; p < pp.size(); ++p) {
    const auto a = pp[p].second.grad().toVector(), b = bp[p].second.grad().toVector();
    float scale = 0;
    for (float v : a) scale = std::max(scale, std::abs(v));
    for (size_t k = 0; k < a.size(); ++k)
      ASSERT_NEAR(b[k], a[k], 1e-3 * scale + 1e-6) << pp[p].first << " element " << k;
  }
}
