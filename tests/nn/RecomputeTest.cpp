// Activation recomputation (--recompute): gradients bit-for-bit equal to a run
// without it, in fp32 and bf16, for gpt and mlp; less memory kept after forward.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd/Precision.h"
#include "core/Memory.h"
#include "nn/Gpt.h"
#include "nn/Models.h"
#include "nn/RecomputeModes.h"

using namespace dtrain;
using namespace dtrain::nn;
using autograd::Variable;

namespace {

std::pair<Tensor, Tensor> byteBatch(int64_t B, int64_t T) {
  Tensor x = Tensor::empty({B, T}, DType::I32), y = Tensor::empty({B, T}, DType::I32);
  Rng rng(5);
  for (int64_t i = 0; i < B * T; ++i) {
    x.data<int32_t>()[i] = static_cast<int32_t>(rng.below(256));
    y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(256));
  }
  return {x, y};
}

struct Result {
  std::vector<float> loss;
  std::vector<std::vector<float>> grads;
};

std::vector<float> values(const Tensor& t) {
  const float* p = t.data<float>();
  return {p, p + t.numel()};
}

// Two backward passes (the second accumulates into the first's gradients).
Result gptGradients(const std::string& mode) {
  auto model = makeGpt("gpt-tiny", 3);
  applyRecompute(*model, mode);
  auto [x, y] = byteBatch(2, 16);
  Result r;
  model->zeroGrad();
  for (int i = 0; i < 2; ++i) {
    Variable l = model->loss(x, y);
    r.loss.push_back(l.item());
    l.backward();
  }
  for (auto& [name, p] : model->namedParameters()) r.grads.push_back(values(p.grad()));
  return r;
}

void expectBitwiseEqual(const Result& a, const Result& b, const std::string& what) {
  ASSERT_EQ(a.loss.size(), b.loss.size());
  for (size_t i = 0; i < a.loss.size(); ++i)
    EXPECT_EQ(std::memcmp(&a.loss[i], &b.loss[i], sizeof(float)), 0) << what << " loss " << i;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_EQ(a.grads[i].size(), b.grads[i].size());
    EXPECT_EQ(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)), 0)
        << what << ": gradient " << i << " differs";
  }
}

}  // namespace

TEST(Recompute, GptGradientsBitwiseEqualFp32AndBf16) {
  for (auto precision : {autograd::Precision::FP32, autograd::Precision::BF16}) {
    autograd::PrecisionScope scope(precision);
    const Result none = gptGradients("none");
    double sum = 0;
    for (auto& g : none.grads)
      for (float v : g) sum += std::abs(v);
    ASSERT_GT(sum, 0);  // the comparison is not between zeros
    expectBitwiseEqual(none, gptGradients("blocks"), "blocks");
    expectBitwiseEqual(none, gptGradients("all"), "all");
  }
}

TEST(Recompute, MlpGradientsBitwiseEqual) {
  auto grads = [](const std::string& mode) {
    auto model = makeModel("mlp", 1);
    applyRecompute(*model, mode);
    Rng rng(2);
    Tensor x = Tensor::empty({8, 1, 28, 28});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform();
    Result r;
    model->zeroGrad();
    Variable out = (*model)(Variable(x));
    Variable l = autograd::mean(autograd::mul(out, out));
    r.loss.push_back(l.item());
    l.backward();
    for (auto& [name, p] : model->namedParameters()) r.grads.push_back(values(p.grad()));
    return r;
  };
  const Result none = grads("none");
  expectBitwiseEqual(none, grads("blocks"), "blocks");
  expectBitwiseEqual(none, grads("all"), "all");
}

TEST(Recompute, KeepsLessAfterForward) {
  // Bytes still allocated after forward (the activations kept for backward).
  auto keptAfterForward = [](const std::string& mode) {
    auto model = makeGpt("gpt-tiny", 3);
    applyRecompute(*model, mode);
    auto [x, y] = byteBatch(4, 64);
    const int64_t before = memory::stats().currentBytes;
    Variable l = model->loss(x, y);
    const int64_t kept = memory::stats().currentBytes - before;
    l.backward();
    return kept;
  };
  const int64_t none = keptAfterForward("none"), blocks = keptAfterForward("blocks"),
                all = keptAfterForward("all");
  EXPECT_LT(blocks, none / 2) << "none " << none << ", blocks " << blocks;
  EXPECT_LT(all, none) << "none " << none << ", all " << all;
}

TEST(Recompute, ModesCountAndUnknownModeIsUsageError) {
  auto model = makeGpt("gpt-tiny", 3);
  EXPECT_EQ(applyRecompute(*model, "blocks"), 2);  // two transformer blocks
  EXPECT_EQ(applyRecompute(*model, "all"), 8);     // ln_1, attn, ln_2, mlp of each
  EXPECT_EQ(applyRecompute(*model, "none"), 0);
  EXPECT_THROW(applyRecompute(*model, "some"), UsageError);
}
