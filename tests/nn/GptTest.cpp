// The GPT model: nanoGPT's parameter names and layouts, init, causality,
// a finite-difference check through a whole (small) model, and a loss that
// falls on a repeating byte sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "TestData.h"
#include "autograd/GradCheck.h"
#include "nn/Gpt.h"
#include "optim/Factory.h"

using namespace dtrain;
using dtrain::test::randn;
using namespace dtrain::nn;
using autograd::Variable;

namespace {


// A repeating byte pattern: tokens[b, t] = text[(offset_b + t) % n], targets shifted by one.
std::pair<Tensor, Tensor> repeatingBatch(int64_t B, int64_t T) {
  const std::string text = "hello gpt, hello bytes! ";
  const int64_t n = static_cast<int64_t>(text.size());
  Tensor x = Tensor::empty({B, T}, DType::I32), y = Tensor::empty({B, T}, DType::I32);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      x.data<int32_t>()[b * T + t] = static_cast<unsigned char>(text[(3 * b + t) % n]);
      y.data<int32_t>()[b * T + t] = static_cast<unsigned char>(text[(3 * b + t + 1) % n]);
    }
  return {x, y};
}

double stddev(const Tensor& t) {
  double s = 0, q = 0;
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) s += p[i], q += double(p[i]) * p[i];
  const double m = s / t.numel();
  return std::sqrt(q / t.numel() - m * m);
}

}  // namespace

TEST(Gpt, TinyParameterNamesAndShapesMatchTorchGpt) {
  // torch_gpt.py's GPT(2, 2, 64, 64).named_parameters(), in order (the tied
  // lm_head.weight appears once, as transformer.wte.weight).
  std::vector<std::pair<std::string, Shape>> expected{
      {"transformer.wte.weight", {256, 64}}, {"transformer.wpe.weight", {64, 64}}};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    std::vector<std::pair<std::string, Shape>> block{
        {p + "ln_1.weight", {64}},           {p + "ln_1.bias", {64}},
        {p + "attn.c_attn.weight", {192, 64}}, {p + "attn.c_attn.bias", {192}},
        {p + "attn.c_proj.weight", {64, 64}},  {p + "attn.c_proj.bias", {64}},
        {p + "ln_2.weight", {64}},           {p + "ln_2.bias", {64}},
        {p + "mlp.c_fc.weight", {256, 64}},   {p + "mlp.c_fc.bias", {256}},
        {p + "mlp.c_proj.weight", {64, 256}}, {p + "mlp.c_proj.bias", {64}}};
    expected.insert(expected.end(), block.begin(), block.end());
  }
  expected.push_back({"transformer.ln_f.weight", {64}});
  expected.push_back({"transformer.ln_f.bias", {64}});

  auto m = makeGpt("gpt-tiny", 1);
  auto params = m->namedParameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].first, expected[i].first) << i;
    EXPECT_EQ(params[i].second.shape(), expected[i].second) << params[i].first;
  }
  // state_dict() adds the tie's alias, sharing the embedding's storage.
  auto sd = m->stateDict();
  ASSERT_EQ(sd.size(), expected.size() + 1);
  EXPECT_EQ(sd.back().first, "lm_head.weight");
  EXPECT_EQ(sd.back().second.data<float>(), params[0].second.data().data<float>());
}

TEST(Gpt, PresetsAndParameterCounts) {
  EXPECT_EQ(gptPresetNames(), (std::vector<std::string>{"gpt-tiny", "gpt-small", "gpt-base"}));
  const GptConfig s = gptConfig("gpt-small");
  EXPECT_EQ(s.nLayer, 4);
  EXPECT_EQ(s.nHead, 4);
  EXPECT_EQ(s.nEmbd, 128);
  EXPECT_EQ(s.blockSize, 128);
  EXPECT_EQ(gptConfig("gpt-base").blockSize, 256);
  for (const auto& name : gptPresetNames())
    EXPECT_EQ(makeGpt(name, 1)->parameterCount(), gptParameterCount(gptConfig(name))) << name;
  EXPECT_EQ(gptParameterCount(gptConfig("gpt-tiny")), 256 * 64 + 64 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 128);
  EXPECT_THROW(gptConfig("gpt-huge"), UsageError);
  EXPECT_THROW(makeGpt(GptConfig{1, 3, 8, 4, 16}, 1), UsageError);  // 8 not divisible by 3
}

TEST(Gpt, NanoGptInitIsSeeded) {
  auto a = makeGpt("gpt-small", 7), b = makeGpt("gpt-small", 7), c = makeGpt("gpt-small", 8);
  auto pa = a->namedParameters(), pb = b->namedParameters(), pc = c->namedParameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i].second.data().toVector(), pb[i].second.data().toVector());
  EXPECT_NE(pa[0].second.data().toVector(), pc[0].second.data().toVector());
  for (auto& [name, v] : pa) {
    const Tensor& t = v.data();
    if (name.ends_with(".bias")) {
      EXPECT_EQ(t.toVector(), std::vector<float>(t.numel(), 0.f)) << name;
    } else if (name.find(".ln_") != std::string::npos) {
      EXPECT_EQ(t.toVector(), std::vector<float>(t.numel(), 1.f)) << name;
    } else {
      const double want = name.ends_with("c_proj.weight") ? 0.02 / std::sqrt(8.0) : 0.02;
      EXPECT_NEAR(stddev(t), want, 0.05 * want) << name;
    }
  }
}

TEST(Gpt, ForwardShapesCausalityAndInitialLoss) {
  auto m = makeGpt("gpt-tiny", 3);
  auto [x, y] = repeatingBatch(2, 10);
  Variable logits = m->forward(Variable(x));
  ASSERT_EQ(logits.shape(), (Shape{2, 10, 256}));
  // Changing the last token changes no earlier prediction.
  Tensor x2 = x.clone();
  x2.data<int32_t>()[9] = 7;
  Tensor l2 = m->forward(Variable(x2)).data();
  for (int64_t t = 0; t < 9 * 256; ++t) EXPECT_EQ(logits.data().data<float>()[t], l2.data<float>()[t]);
  // Tokens given as f32 integers (a loader's Variable) give the same logits.
  Tensor xf = Tensor::empty({2, 10});
  for (int64_t i = 0; i < 20; ++i) xf.data<float>()[i] = static_cast<float>(x.data<int32_t>()[i]);
  EXPECT_EQ(m->forward(Variable(xf)).data().toVector(), logits.data().toVector());
  // Near-uniform predictions at init: loss ~ ln 256.
  EXPECT_NEAR(m->loss(x, y).item(), std::log(256.0), 0.05);
  EXPECT_THROW(m->forward(Variable(Tensor::zeros({1, 65}, DType::I32))), Error);  // > block 64
  EXPECT_THROW(m->forward(Variable(Tensor::full({1, 3}, 300.f))), Error);         // not a byte
}

TEST(Gpt, WholeModelGradCheck) {
  // One layer, C 8, T 5, a 16-token vocabulary. Parameters are replaced by the
  // checked variables (larger than the init, so gradients are well above the
  // finite-difference noise): the tied embedding (used twice), wpe, c_attn,
  // the MLP's c_fc bias and ln_1's weight.
  auto m = makeGpt(GptConfig{1, 2, 8, 8, 16}, 1);
  auto& blk = static_cast<GptBlock&>(*m->transformer->h->children()[0].second);
  Tensor tokens = Tensor::fromInts({1, 5, 2, 2, 9, 15, 0, 3, 3, 7}, {2, 5});
  Tensor targets = Tensor::fromInts({5, 2, 2, 9, 4, 0, 3, 3, 7, 1}, {2, 5});
  auto r = autograd::gradCheck(
      [&](const std::vector<Variable>& v) {
        m->transformer->wte->weight = v[0];
        m->transformer->wpe->weight = v[1];
        blk.attn->cAttn->weight = v[2];
        blk.mlp->cFc->bias = v[3];
        blk.ln1->weight = v[4];
        return m->loss(tokens, targets);
      },
      {randn({16, 8}, 1, 0.5f), randn({8, 8}, 2, 0.5f), randn({24, 8}, 3, 0.5f), randn({32}, 4, 0.5f),
       randn({8}, 5, 1.f)},
      {.eps = 1e-2, .atol = 1e-3, .rtol = 2e-2});
  EXPECT_TRUE(r.ok) << r.worst << " (error " << r.worstError << ")";
}

TEST(Gpt, TinyLossFallsOnARepeatingSequence) {
  auto m = makeGpt("gpt-tiny", 5);
  auto opt = optim::makeOptimizer("adam", m->namedParameters(), {.lr = 3e-3});
  auto [x, y] = repeatingBatch(4, 32);
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt->zeroGrad();
    Variable loss = m->loss(x, y);
    loss.backward();
    opt->step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  EXPECT_NEAR(first, std::log(256.f), 0.05f);
  EXPECT_LT(last, 0.5f * first) << "loss " << first << " -> " << last;
}
