#include "nn/Gpt.h"

#include "core/NameRegistry.h"

#include <cmath>
#include <sstream>

#include "nn/Init.h"

namespace dtrain::nn {
namespace {

using autograd::add;

const NameRegistry<GptConfig>& presets() {
  static const NameRegistry<GptConfig> p("GPT preset", {{"gpt-tiny", {2, 2, 64, 64, 256}},
                                                        {"gpt-small", {4, 4, 128, 128, 256}},
                                                        {"gpt-base", {6, 6, 192, 256, 256}}});
  return p;
}

void checkConfig(const GptConfig& c) {
  DTRAIN_CHECK_USAGE(c.nLayer > 0 && c.nHead > 0 && c.nEmbd > 0 && c.blockSize > 0 && c.vocab > 0,
                     "GPT config: sizes must be positive (n_layer ", c.nLayer, ", n_head ", c.nHead,
                     ", n_embd ", c.nEmbd, ", block ", c.blockSize, ", vocab ", c.vocab, ")");
  DTRAIN_CHECK_USAGE(c.nEmbd % c.nHead == 0, "GPT config: n_embd ", c.nEmbd,
                     " is not divisible by n_head ", c.nHead);
}

// Token ids as a contiguous I32 tensor (F32 inputs must hold integers).
Tensor tokenIds(const Tensor& t) {
  if (t.dtype() == DType::I32) return t.contiguous();
  DTRAIN_CHECK(t.dtype() == DType::F32, "GPT: tokens must be int32 (or f32 integers), got ",
               dtypeName(t.dtype()));
  Tensor c = t.contiguous(), ids = Tensor::empty(c.shape(), DType::I32);
  for (int64_t i = 0; i < c.numel(); ++i) {
    const float v = c.data<float>()[i];
    DTRAIN_CHECK(v == std::floor(v), "GPT: token ", i, " is ", v, ", not an integer id");
    ids.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return ids;
}

// nanoGPT's _init_weights plus the scaled residual projections.
void initNanoGpt(Module& m, int64_t nLayer, uint64_t seed) {
  Rng rng(seed);
  const float residual = 0.02f / std::sqrt(2.f * static_cast<float>(nLayer));
  for (auto& [name, p] : m.namedParameters()) {
    Tensor& t = p.data();
    const bool isBias = name.ends_with(".bias");
    const bool isNormWeight = name.find(".ln_") != std::string::npos && !isBias;
    if (isBias) init::constant(t, 0.f);
    else if (isNormWeight) init::constant(t, 1.f);
    else if (name.ends_with("c_proj.weight")) init::normal(t, 0.f, residual, rng);
    else init::normal(t, 0.f, 0.02f, rng);
  }
}

}  // namespace

const std::vector<std::string>& gptPresetNames() {
  static const std::vector<std::string> names = presets().names();
  return names;
}

GptConfig gptConfig(const std::string& name) { return presets().find(name); }

int64_t gptParameterCount(const GptConfig& c) {
  const int64_t C = c.nEmbd;
  return c.vocab * C + c.blockSize * C + c.nLayer * (12 * C * C + 13 * C) + 2 * C;
}

CausalSelfAttention::CausalSelfAttention(int64_t nEmbd, int64_t nHead_, Rng& rng) : nHead(nHead_) {
  cAttn = std::make_shared<Linear>(nEmbd, 3 * nEmbd, rng);
  cProj = std::make_shared<Linear>(nEmbd, nEmbd, rng);
  registerModule("c_attn", cAttn);
  registerModule("c_proj", cProj);
}
Variable CausalSelfAttention::forward(const Variable& x) {
  // Under tensor parallelism c_attn yields this rank's heads only.
  const int64_t heads = cAttn->tensorParallel() ? nHead / cAttn->tp->size : nHead;
  return (*cProj)(autograd::causalSelfAttention((*cAttn)(x), heads));
}
void CausalSelfAttention::tensorParallelize(const std::string& prefix,
                                            const std::shared_ptr<TensorParallelGroup>& group,
                                            TensorParallelPlan& plan) {
  DTRAIN_CHECK_USAGE(nHead % group->size == 0, "--tensor-parallel ", group->size,
                     ": the attention's ", nHead, " heads do not split evenly");
  cAttn->splitColumns(prefix + "c_attn.", group, 3, plan);
  cProj->splitRows(prefix + "c_proj.", group, plan);
}
std::string CausalSelfAttention::describe() const {
  return "CausalSelfAttention(heads=" + std::to_string(nHead) + ")";
}

GptMlp::GptMlp(int64_t nEmbd, Rng& rng) {
  cFc = std::make_shared<Linear>(nEmbd, 4 * nEmbd, rng);
  cProj = std::make_shared<Linear>(4 * nEmbd, nEmbd, rng);
  registerModule("c_fc", cFc);
  registerModule("gelu", std::make_shared<GELU>());  // no parameters, as in torch's MLP
  registerModule("c_proj", cProj);
}
Variable GptMlp::forward(const Variable& x) {
  return (*cProj)(autograd::gelu((*cFc)(x)));
}
void GptMlp::tensorParallelize(const std::string& prefix,
                               const std::shared_ptr<TensorParallelGroup>& group,
                               TensorParallelPlan& plan) {
  cFc->splitColumns(prefix + "c_fc.", group, 1, plan);
  cProj->splitRows(prefix + "c_proj.", group, plan);
}

GptBlock::GptBlock(const GptConfig& c, Rng& rng) {
  ln1 = std::make_shared<LayerNorm>(c.nEmbd, 1e-5f);
  attn = std::make_shared<CausalSelfAttention>(c.nEmbd, c.nHead, rng);
  ln2 = std::make_shared<LayerNorm>(c.nEmbd, 1e-5f);
  mlp = std::make_shared<GptMlp>(c.nEmbd, rng);
  registerModule("ln_1", ln1);
  registerModule("attn", attn);
  registerModule("ln_2", ln2);
  registerModule("mlp", mlp);
}
Variable GptBlock::forward(const Variable& x) {
  Variable h = add(x, (*attn)((*ln1)(x)));
  return add(h, (*mlp)((*ln2)(h)));
}

GptTransformer::GptTransformer(const GptConfig& c, Rng& rng) {
  wte = std::make_shared<Embedding>(c.vocab, c.nEmbd, rng);
  wpe = std::make_shared<Embedding>(c.blockSize, c.nEmbd, rng);
  h = std::make_shared<Sequential>();
  for (int64_t i = 0; i < c.nLayer; ++i) h->append(std::make_shared<GptBlock>(c, rng));
  lnF = std::make_shared<LayerNorm>(c.nEmbd, 1e-5f);
  registerModule("wte", wte);
  registerModule("wpe", wpe);
  registerModule("h", h);
  registerModule("ln_f", lnF);
}

Variable GptTransformer::forward(const Variable& tokens) { return (*lnF)((*h)(embed(tokens))); }

Variable GptTransformer::embed(const Variable& tokens) {
  Tensor ids = tokenIds(tokens.data());
  const int64_t block = wpe->weight.shape()[0];
  DTRAIN_CHECK(ids.dim() == 2 && ids.size(1) >= 1 && ids.size(1) <= block,
               "GPT: tokens must be [batch, time] with 1 <= time <= block size ", block, ", got ",
               shapeStr(ids.shape()));
  const int64_t B = ids.size(0), T = ids.size(1);
  // Positions as [B, T] ids: the embedding's scatter-add then sums wpe's
  // gradient over the batch, so no broadcasting add is needed.
  Tensor pos = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < B * T; ++i) pos.data<int32_t>()[i] = static_cast<int32_t>(i % T);
  return add(wte->lookup(ids), wpe->lookup(pos));
}

Gpt::Gpt(const GptConfig& config, uint64_t seed) : config_(config) {
  checkConfig(config);
  Rng unused(seed);  // the layers' own default init is overwritten below
  transformer = std::make_shared<GptTransformer>(config, unused);
  registerModule("transformer", transformer);
  initNanoGpt(*this, config.nLayer, seed);
}

Variable Gpt::forward(const Variable& tokens) { return head(transformer->forward(tokens)); }

Variable Gpt::head(const Variable& x) {
  // lm_head: the tied embedding matrix, no bias.
  return autograd::linear(x, transformer->wte->weight, Variable());
}

Variable Gpt::loss(const Tensor& tokens, const Tensor& targets) {
  Variable logits = forward(Variable(tokens));
  Tensor t = targets.dtype() == DType::I32 ? targets : tokenIds(targets);
  DTRAIN_CHECK(t.numel() == logits.numel() / config_.vocab, "GPT loss: targets ",
               shapeStr(t.shape()), " do not match tokens ", shapeStr(tokens.shape()));
  return autograd::crossEntropy(logits, t);
}

std::string Gpt::describe() const {
  std::ostringstream os;
  os << "GPT(n_layer=" << config_.nLayer << ", n_head=" << config_.nHead
     << ", n_embd=" << config_.nEmbd << ", block=" << config_.blockSize
     << ", vocab=" << config_.vocab << ", lm_head tied to wte)";
  return os.str();
}

const std::vector<std::pair<std::string, std::string>>& Gpt::tiedAliases() {
  static const std::vector<std::pair<std::string, std::string>> a{
      {"lm_head.weight", "transformer.wte.weight"}};
  return a;
}

std::vector<std::pair<std::string, Tensor>> Gpt::stateDict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : namedParameters()) out.emplace_back(name, p.data());
  for (auto& [alias, target] : tiedAliases())
    for (auto& [name, p] : namedParameters())
      if (name == target) out.emplace_back(alias, p.data());
  return out;
}

std::shared_ptr<Gpt> makeGpt(const GptConfig& config, uint64_t seed) {
  return std::make_shared<Gpt>(config, seed);
}

std::shared_ptr<Gpt> makeGpt(const std::string& name, uint64_t seed) {
  return makeGpt(gptConfig(name), seed);
}

}  // namespace dtrain::nn
