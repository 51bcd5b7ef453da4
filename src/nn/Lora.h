#pragma once
// LoRA (Hu et al. 2021), as peft builds it: a frozen Linear layer W gets a
// trainable low-rank update, y = x W^T + b + (alpha / r) x A^T B^T, with
// A [r, in] drawn as torch's default Linear init (peft: kaiming_uniform_(a =
// sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in))) and B [out, r] zero, so training
// starts from the base model's function. Every other parameter is frozen: it
// gets no gradient and no optimizer state, and data parallelism communicates
// only the adapters' gradients (fusion buckets skip frozen parameters).
//
// Adapter names are peft's: "<layer>.lora_A.weight", "<layer>.lora_B.weight"
// (e.g. transformer.h.0.attn.c_attn.lora_A.weight); the base names are unchanged.
// Targets (--lora-targets, comma-separated):
//   attn: gpt's attention Linear layers (attn.c_attn, attn.c_proj);
//   mlp:  gpt's MLP Linear layers (mlp.c_fc, mlp.c_proj), and every Linear
//         layer of the mlp model (which is one MLP).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/Module.h"
#include "tensor/Tensor.h"

namespace dtrain::nn {

struct LoraOptions {
  int64_t rank = 0;  // 0: no LoRA
  double alpha = 8;  // peft's default lora_alpha
  std::vector<std::string> targets;
  double scale() const { return alpha / static_cast<double>(rank); }
};

const std::vector<std::string>& loraTargetNames();
// "attn,mlp" -> {"attn", "mlp"}; throws UsageError on an unknown or empty target.
std::vector<std::string> parseLoraTargets(const std::string& csv);
// The targets that select at least one Linear layer of the model (lenet: none).
std::vector<std::string> loraTargetsOf(Module& model, const std::string& modelName);

// Attaches adapters to the targeted Linear layers and freezes every other
// parameter. Returns the number of adapted layers. Throws UsageError on a rank
// <= 0, a non-finite alpha, or a target that selects no layer of the model.
int applyLora(Module& model, const std::string& modelName, const LoraOptions& options,
              uint64_t seed);

bool isLoraParameter(const std::string& name);
// The parameters that require a gradient (all of them without LoRA).
std::vector<std::pair<std::string, Variable>> trainableParameters(const Module& model);
int64_t trainableParameterCount(const Module& model);

// Folds adapters into their base weights: for every "<layer>.lora_A.weight" /
// "<layer>.lora_B.weight" pair, "<layer>.weight" += scale * B A; the adapter
// tensors are removed. Throws dtrain::Error on an unpaired adapter, a missing
// base weight or mismatched shapes.
void mergeLora(std::vector<std::pair<std::string, Tensor>>& tensors, double scale);

}  // namespace dtrain::nn
