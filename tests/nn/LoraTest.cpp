// LoRA adapters: gradients by finite differences, frozen base, merge equal to
// the unmerged forward, target selection.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "TestData.h"
#include "autograd/GradCheck.h"
#include "nn/Gpt.h"
#include "nn/Lora.h"
#include "nn/Models.h"
#include "nn/Init.h"

using namespace dtrain;
using namespace dtrain::nn;
using autograd::Variable;
using dtrain::test::randn;

namespace {

LoraOptions options(int64_t rank, double alpha, std::vector<std::string> targets) {
  LoraOptions o;
  o.rank = rank;
  o.alpha = alpha;
  o.targets = std::move(targets);
  return o;
}

// B is zero after applyLora: random values so that the adapters matter.
void randomizeAdapters(Module& m, uint64_t seed) {
  Rng rng(seed);
  for (auto& [name, p] : m.namedParameters())
    if (isLoraParameter(name)) init::normal(p.data(), 0.f, 0.05f, rng);
}

}  // namespace

TEST(Lora, AdapterGradientsMatchFiniteDifferences) {
  Rng rng(1);
  Linear layer(6, 5, rng);
  const float scale = 16.f / 3.f;  // alpha / r with alpha 16, r 3
  layer.attachLowRank(std::make_shared<Linear>(6, 3, rng, false),
                      std::make_shared<Linear>(3, 5, rng, false), scale);
  // Inputs: x, A, B (the base weight and bias stay fixed).
  auto fn = [&](const std::vector<Variable>& in) {
    layer.loraA->weight = in[1];
    layer.loraB->weight = in[2];
    return layer(in[0]);
  };
  auto r = autograd::gradCheck(fn, {randn({4, 6}, 2), randn({3, 6}, 3), randn({5, 3}, 4)});
  EXPECT_TRUE(r.ok) << r.worst;
}

TEST(Lora, FreezesTheBaseAndTrainsOnlyAdapters) {
  auto model = makeGpt("gpt-tiny", 1);
  const int64_t all = model->parameterCount();
  EXPECT_EQ(applyLora(*model, "gpt-tiny", options(4, 8, {"attn", "mlp"}), 0), 8);
  // Per block (C = 64): c_attn 4 (64 + 192), c_proj 4 (64 + 64), c_fc 4 (64 + 256), c_proj 4 (256 + 64).
  EXPECT_EQ(trainableParameterCount(*model), 2 * 4 * (256 + 128 + 320 + 320));
  EXPECT_EQ(model->parameterCount(), all + trainableParameterCount(*model));
  for (auto& [name, p] : model->namedParameters()) EXPECT_EQ(p.requiresGrad(), isLoraParameter(name)) << name;
  auto named = model->namedParameters();
  bool sawPeftName = false;
  for (auto& [name, p] : named) sawPeftName |= name == "transformer.h.0.attn.c_attn.lora_A.weight";
  EXPECT_TRUE(sawPeftName);

  // B starts at zero, so the model computes what the base does; gradients reach only adapters.
  Tensor x = Tensor::empty({2, 8}, DType::I32), y = Tensor::empty({2, 8}, DType::I32);
  for (int64_t i = 0; i < 16; ++i) x.data<int32_t>()[i] = int32_t(i * 7 % 256), y.data<int32_t>()[i] = int32_t(i * 3 % 256);
  model->zeroGrad();
  model->loss(x, y).backward();
  for (auto& [name, p] : named) {
    if (isLoraParameter(name)) {
      ASSERT_TRUE(p.grad().defined()) << name;
    } else {
      EXPECT_FALSE(p.grad().defined()) << name << " is frozen but got a gradient";
    }
  }
  // dL/dA = scale * B^T (...) is zero while B is zero; dL/dB is not.
  double gb = 0;
  for (auto& [name, p] : named)
    if (name.ends_with("lora_B.weight"))
      for (int64_t i = 0; i < p.numel(); ++i) gb += std::abs(p.grad().data<float>()[i]);
  EXPECT_GT(gb, 0);
}

TEST(Lora, MergedWeightsComputeTheUnmergedForward) {
  auto adapted = makeGpt("gpt-tiny", 2);
  applyLora(*adapted, "gpt-tiny", options(4, 16, {"attn", "mlp"}), 0);
  randomizeAdapters(*adapted, 9);
  Tensor x = Tensor::empty({2, 12}, DType::I32);
  for (int64_t i = 0; i < 24; ++i) x.data<int32_t>()[i] = int32_t(i * 11 % 256);
  autograd::NoGradGuard noGrad;
  Tensor want = adapted->forward(Variable(x)).data().clone();

  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, p] : adapted->namedParameters()) tensors.emplace_back(name, p.data().clone());
  mergeLora(tensors, 16.0 / 4);
  auto plain = makeGpt("gpt-tiny", 77);  // other init: every weight comes from `tensors`
  auto params = plain->namedParameters();
  ASSERT_EQ(tensors.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(tensors[i].first, params[i].first);
    params[i].second.data().copyFrom(tensors[i].second);
  }
  Tensor got = plain->forward(Variable(x)).data();
  double worst = 0, diffBase = 0;
  Tensor base = makeGpt("gpt-tiny", 2)->forward(Variable(x)).data();
  for (int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, double(std::abs(got.data<float>()[i] - want.data<float>()[i])));
    diffBase = std::max(diffBase, double(std::abs(base.data<float>()[i] - want.data<float>()[i])));
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(diffBase, 1e-3);  // the adapters changed the function: the check is not vacuous
}

TEST(Lora, TargetsAndUsageErrors) {
  auto mlp = makeModel("mlp", 1);
  EXPECT_EQ(loraTargetsOf(*mlp, "mlp"), std::vector<std::string>{"mlp"});
  EXPECT_EQ(applyLora(*mlp, "mlp", options(2, 4, {"mlp"}), 0), 3);  // its three Linear layers
  auto mlp2 = makeModel("mlp", 1);
  EXPECT_THROW(applyLora(*mlp2, "mlp", options(2, 4, {"attn"}), 0), UsageError);
  EXPECT_THROW(applyLora(*mlp2, "mlp", options(0, 4, {"mlp"}), 0), UsageError);
  auto lenet = makeModel("lenet", 1);
  EXPECT_TRUE(loraTargetsOf(*lenet, "lenet").empty());
  EXPECT_THROW(parseLoraTargets("attn,ffn"), UsageError);
  EXPECT_EQ(parseLoraTargets("attn,mlp").size(), 2u);
}

TEST(Lora, MergeRejectsUnpairedAdapter) {
  std::vector<std::pair<std::string, Tensor>> t{{"l.weight", Tensor::zeros({3, 2})},
                                                {"l.lora_A.weight", Tensor::zeros({1, 2})}};
  EXPECT_THROW(mergeLora(t, 1.0), Error);
}
