#pragma once
// nanoGPT's GPT-2, as ../shared/bench/torch_gpt.py builds it: token embedding
// wte [V, C] + position embedding wpe [block, C]; nLayer pre-LayerNorm blocks
//   x = x + c_proj(attn(c_attn(ln_1(x))));  x = x + c_proj(gelu(c_fc(ln_2(x))))
// (causal multi-head attention fused in one op, exact erf GELU, Linear layers
// with biases, LayerNorm eps 1e-5, no dropout); final ln_f; lm_head tied to wte.
//
// Parameter names and layouts are nanoGPT's state_dict keys, in its order:
//   transformer.wte.weight [V, C], transformer.wpe.weight [block, C],
//   transformer.h.<i>.ln_1.{weight,bias} [C],
//   transformer.h.<i>.attn.c_attn.{weight [3C, C], bias [3C]},
//   transformer.h.<i>.attn.c_proj.{weight [C, C], bias [C]},
//   transformer.h.<i>.ln_2.{weight,bias} [C],
//   transformer.h.<i>.mlp.c_fc.{weight [4C, C], bias [4C]},
//   transformer.h.<i>.mlp.c_proj.{weight [C, 4C], bias [C]},
//   transformer.ln_f.{weight,bias} [C].
// The tie: lm_head.weight IS transformer.wte.weight, one parameter, listed
// once under "transformer.wte.weight" (as torch's named_parameters() lists it).
// torch's state_dict() also carries the key "lm_head.weight" (same tensor), and
// load_state_dict(strict=True) wants it: stateDict() adds that alias, and
// tiedAliases() names it for code that writes or reads checkpoints.
//
// Init (nanoGPT): Linear and Embedding weights ~ N(0, 0.02), biases 0,
// c_proj weights ~ N(0, 0.02 / sqrt(2 nLayer)), LayerNorm weight 1, bias 0,
// drawn from Rng(seed) in parameter order.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/Layers.h"

namespace dtrain::nn {

struct GptConfig {
  int64_t nLayer = 2, nHead = 2, nEmbd = 64, blockSize = 64, vocab = 256;
};

// Presets "gpt-tiny" (2 layers, 2 heads, 64 wide, block 64), "gpt-small"
// (4, 4, 128, 128), "gpt-base" (6, 6, 192, 256); vocabulary 256 (bytes).
// Throws UsageError naming the presets on an unknown name.
GptConfig gptConfig(const std::string& name);
const std::vector<std::string>& gptPresetNames();

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t nEmbd, int64_t nHead, Rng& rng);
  Variable forward(const Variable& x) override;  // [B, T, C] -> [B, T, C]
  std::string describe() const override;
  // Heads split across the group: c_attn column-parallel (each rank's q, k
  // and v of its heads), c_proj row-parallel.
  void tensorParallelize(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                         TensorParallelPlan& plan) override;
  std::shared_ptr<Linear> cAttn, cProj;
  int64_t nHead;
};

class GptMlp : public Module {
 public:
  GptMlp(int64_t nEmbd, Rng& rng);
  Variable forward(const Variable& x) override;
  std::string describe() const override { return "MLP"; }
  // c_fc column-parallel, c_proj row-parallel: GELU runs on each rank's slice.
  void tensorParallelize(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                         TensorParallelPlan& plan) override;
  std::shared_ptr<Linear> cFc, cProj;
};

class GptBlock : public Module {
 public:
  GptBlock(const GptConfig& c, Rng& rng);
  Variable forward(const Variable& x) override;
  std::string describe() const override { return "Block"; }
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<GptMlp> mlp;
};

// nanoGPT's `transformer` ModuleDict: embeddings, blocks and the final norm.
// forward: tokens [B, T] -> ln_f output [B, T, C].
class GptTransformer : public Module {
 public:
  GptTransformer(const GptConfig& c, Rng& rng);
  Variable forward(const Variable& tokens) override;
  // The token plus position embeddings [B, T, C] (the first pipeline layer).
  Variable embed(const Variable& tokens);
  std::string describe() const override { return "ModuleDict"; }
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<Sequential> h;
  std::shared_ptr<LayerNorm> lnF;
};

class Gpt : public Module {
 public:
  Gpt(const GptConfig& config, uint64_t seed);
  // tokens [B, T] (T <= blockSize) as I32, or as F32 holding integers (what a
  // data loader's Variable carries) -> logits [B, T, vocab].
  Variable forward(const Variable& tokens) override;
  // lm_head on ln_f's output: [B, T, C] -> logits [B, T, vocab].
  Variable head(const Variable& x);
  // Mean cross-entropy over the B*T next-token predictions; targets I32 [B, T].
  Variable loss(const Tensor& tokens, const Tensor& targets);
  std::string describe() const override;

  const GptConfig& config() const { return config_; }
  // (alias, parameter) pairs of tied weights: {"lm_head.weight", "transformer.wte.weight"}.
  static const std::vector<std::pair<std::string, std::string>>& tiedAliases();
  std::vector<std::pair<std::string, std::string>> parameterAliases() const override {
    return tiedAliases();
  }
  // torch's state_dict(): the parameters plus the tied aliases (sharing storage).
  std::vector<std::pair<std::string, Tensor>> stateDict() const;

  std::shared_ptr<GptTransformer> transformer;

 private:
  GptConfig config_;
};

// V*C + block*C + nLayer*(12 C^2 + 13 C) + 2C: torch_gpt.py's formula.
int64_t gptParameterCount(const GptConfig& c);

std::shared_ptr<Gpt> makeGpt(const GptConfig& config, uint64_t seed);
std::shared_ptr<Gpt> makeGpt(const std::string& name, uint64_t seed);

}  // namespace dtrain::nn
