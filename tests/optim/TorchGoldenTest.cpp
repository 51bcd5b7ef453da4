// Bitwise agreement with torch.optim 1.13 (Debian python3-torch, AVX2 kernels).
// The expected values were produced by this script (single-tensor path):
//
//   import torch
//   n = 19
//   p0 = [((i % 7) - 3) * 0.375 for i in range(n)]
//   grads = [[(((i * 3 + s * 5) % 11) - 5) * 0.125 for i in range(n)] for s in range(3)]
//   for cls, kw in CONFIGS:  # the five below
//       p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float32))
//       opt = cls([p], foreach=False, **kw)
//       for s in range(3):
//           p.grad = torch.tensor(grads[s], dtype=torch.float32)
//           opt.step()
//       print([float(x).hex() for x in p.detach().tolist()])
//
// 19 elements cover both torch's vectorized body and its scalar tail. The inputs
// are exact in f32, so any difference comes from the update arithmetic.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/Factory.h"

using namespace dtrain;
using namespace dtrain::optim;

namespace {

constexpr int kN = 19;

std::vector<float> runTorchCase(const std::string& name, const OptimizerOptions& o) {
  std::vector<float> p0(kN);
  for (int i = 0; i < kN; ++i) p0[i] = static_cast<float>((i % 7) - 3) * 0.375f;
  auto opt = makeOptimizer(name, {{"w", autograd::Variable(Tensor::fromVector(p0, {kN}), true)}}, o);
  for (int s = 0; s < 3; ++s) {
    std::vector<float> g(kN);
    for (int i = 0; i < kN; ++i) g[i] = static_cast<float>(((i * 3 + s * 5) % 11) - 5) * 0.125f;
    opt->param(0).grad() = Tensor::fromVector(g, {kN});
    opt->step();
  }
  return opt->param(0).data().toVector();
}

void expectTorch(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (optim::detail::builtWithFma())
      EXPECT_EQ(got[i], want[i]) << "element " << i << ": " << std::hexfloat << got[i] << " vs " << want[i];
    else  // without FMA the fused steps round differently, by about an ulp
      EXPECT_NEAR(got[i], want[i], 4e-7f * (1 + std::fabs(want[i]))) << "element " << i;
  }
}

OptimizerOptions opts(double lr) {
  OptimizerOptions o;
  o.lr = lr;
  return o;
}

}  // namespace

TEST(TorchGolden, SgdNesterovWeightDecay) {
  // torch.optim.SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
  OptimizerOptions o = opts(0.1);
  o.momentum = 0.9;
  o.nesterov = true;
  o.weightDecay = 0.01;
  expectTorch(runTorchCase("sgd", o), {
      -0x1.0539fep+0f, -0x1.60827ep-1f, -0x1.f72fap-3f, -0x1.6673dep-3f, 0x1.41b618p-1f,
      0x1.65e508p-1f, 0x1.244dcep+0f, -0x1.64346cp+0f, -0x1.2d15cap-1f, -0x1.08e6d8p-1f,
      -0x1.318216p-4f, 0x1.dec078p-2f, 0x1.9951bep-1f, 0x1.3e042ap+0f, -0x1.4a7e12p+0f,
      -0x1.f3522cp-2f, -0x1.aaf448p-2f, 0x1.a78e36p-6f, 0x1.8b5b18p-4f});
}

TEST(TorchGolden, SgdDampeningWeightDecay) {
  // torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)
  OptimizerOptions o = opts(0.1);
  o.momentum = 0.9;
  o.dampening = 0.1;
  o.weightDecay = 0.01;
  expectTorch(runTorchCase("sgd", o), {
      -0x1.019052p+0f, -0x1.6ad9d8p-1f, -0x1.3337p-2f, -0x1.02c36ap-3f, 0x1.162108p-1f,
      0x1.6f0bacp-1f, 0x1.202504p+0f, -0x1.4fd33p+0f, -0x1.48d47cp-1f, -0x1.dfd3bp-2f,
      -0x1.eab7ecp-5f, 0x1.f19474p-2f, 0x1.91110ap-1f, 0x1.3127bp+0f, -0x1.3ed082p+0f,
      -0x1.26cf2p-1f, -0x1.9bc8fap-2f, 0x1.acee6cp-8f, 0x1.711206p-3f});
}

TEST(TorchGolden, AdamWeightDecay) {
  // torch.optim.Adam(lr=0.01, weight_decay=0.1)
  OptimizerOptions o = opts(0.01);
  o.weightDecay = 0.1;
  expectTorch(runTorchCase("adam", o), {
      -0x1.1b20bp+0f, -0x1.78a9ep-1f, -0x1.7e12f6p-2f, -0x1.2546c4p-6f, 0x1.95224p-2f,
      0x1.7ffa62p-1f, 0x1.1d27bep+0f, -0x1.24b69ap+0f, -0x1.75ac02p-1f, -0x1.80891p-2f,
      -0x1.828fccp-7f, 0x1.8ef1d2p-2f, 0x1.8302e8p-1f, 0x1.1ee5b6p+0f, -0x1.23316ep+0f,
      -0x1.73c2e4p-1f, -0x1.7aaa58p-2f, -0x1.445b38p-8f, 0x1.6861f4p-2f});
}

TEST(TorchGolden, AdamWWeightDecay) {
  // torch.optim.AdamW(lr=0.01, weight_decay=0.1)
  OptimizerOptions o = opts(0.01);
  o.weightDecay = 0.1;
  expectTorch(runTorchCase("adamw", o), {
      -0x1.1b1692p+0f, -0x1.79aabep-1f, -0x1.7e361cp-2f, -0x1.2573dcp-6f, 0x1.95486cp-2f,
      0x1.808876p-1f, 0x1.1dde42p+0f, -0x1.24cdd2p+0f, -0x1.762fe2p-1f, -0x1.8af42ap-2f,
      -0x1.830cfep-7f, 0x1.8f0b3ep-2f, 0x1.840806p-1f, 0x1.1f4bdcp+0f, -0x1.23b8dap+0f,
      -0x1.73a1dep-1f, -0x1.7b7b3cp-2f, -0x1.44c756p-8f, 0x1.682e3ap-2f});
}

TEST(TorchGolden, AdagradAllOptions) {
  // torch.optim.Adagrad(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)
  OptimizerOptions o = opts(0.1);
  o.lrDecay = 0.01;
  o.weightDecay = 0.1;
  o.initialAccumulatorValue = 0.1;
  expectTorch(runTorchCase("adagrad", o), {
      -0x1.12dc0ap+0f, -0x1.57efe6p-1f, -0x1.3c26a4p-2f, -0x1.7fb52cp-4f, 0x1.fdbe1cp-2f,
      0x1.69098ap-1f, 0x1.13e382p+0f, -0x1.38ed96p+0f, -0x1.42efacp-1f, -0x1.b465a8p-2f,
      -0x1.a93ec6p-5f, 0x1.8c106cp-2f, 0x1.884f36p-1f, 0x1.2071bap+0f, -0x1.2e73p+0f,
      -0x1.334d18p-1f, -0x1.754dbep-2f, -0x1.bb364p-9f, 0x1.ecc6a4p-3f});
}
