#include "nn/Lora.h"

#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "core/Error.h"
#include "nn/Init.h"
#include "nn/Layers.h"
#include <algorithm>

namespace dtrain::nn {
namespace {

const std::string kA = ".lora_A.weight", kB = ".lora_B.weight";

bool hasComponent(const std::string& path, const std::string& part) {
  std::istringstream in(path);
  for (std::string c; std::getline(in, c, '.');)
    if (c == part) return true;
  return false;
}

// Which Linear layers (by module path) a target selects, per model name.
using Selector = std::function<bool(const std::string& modelName, const std::string& path)>;
const std::vector<std::pair<std::string, Selector>>& targets() {
  static const std::vector<std::pair<std::string, Selector>> t{
      {"attn", [](const std::string&, const std::string& p) { return hasComponent(p, "attn"); }},
      {"mlp", [](const std::string& model, const std::string& p) {
         return model == "mlp" || hasComponent(p, "mlp");
       }}};
  return t;
}

// Every Linear layer with its path, in registration order (adapters excluded).
void collectLinears(Module& m, const std::string& path,
                    std::vector<std::pair<std::string, Linear*>>& out) {
  if (auto* l = dynamic_cast<Linear*>(&m)) {
    out.emplace_back(path, l);
    return;  // its children are adapters
  }
  for (const auto& [name, child] : m.children())
    collectLinears(*child, path.empty() ? name : path + "." + name, out);
}

std::vector<Linear*> selected(Module& model, const std::string& modelName,
                              const std::string& target) {
  std::vector<std::pair<std::string, Linear*>> all;
  collectLinears(model, "", all);
  std::vector<Linear*> out;
  for (const auto& [name, select] : targets())
    if (name == target)
      for (const auto& [path, l] : all)
        if (select(modelName, path)) out.push_back(l);
  return out;
}

}  // namespace

const std::vector<std::string>& loraTargetNames() {
  static const std::vector<std::string> names{"attn", "mlp"};
  return names;
}

std::vector<std::string> parseLoraTargets(const std::string& csv) {
  std::vector<std::string> out;
  std::istringstream in(csv);
  for (std::string t; std::getline(in, t, ',');) {
    bool known = false;
    for (const auto& [name, select] : targets()) known |= name == t;
    DTRAIN_CHECK_USAGE(known, "--lora-targets: unknown target '", t, "' (known: attn, mlp)");
    out.push_back(t);
  }
  DTRAIN_CHECK_USAGE(!out.empty(), "--lora-targets is empty (known: attn, mlp)");
  return out;
}

std::vector<std::string> loraTargetsOf(Module& model, const std::string& modelName) {
  std::vector<std::string> out;
  for (const auto& [name, select] : targets())
    if (!selected(model, modelName, name).empty()) out.push_back(name);
  return out;
}

int applyLora(Module& model, const std::string& modelName, const LoraOptions& o, uint64_t seed) {
  DTRAIN_CHECK_USAGE(o.rank > 0, "--lora-rank must be positive (got ", o.rank, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(o.alpha) && o.alpha > 0,
                     "--lora-alpha must be a positive finite number (got ", o.alpha, ")");
  std::vector<Linear*> layers;
  for (const auto& t : o.targets) {
    auto s = selected(model, modelName, t);
    if (s.empty()) {
      const auto has = loraTargetsOf(model, modelName);
      std::string known;
      for (const auto& h : has) known += (known.empty() ? "" : ", ") + h;
      throw UsageError("--lora-targets " + t + ": model " + modelName + " has no such layers (" +
                       (has.empty() ? "it has no LoRA targets" : "its targets: " + known) + ")");
    }
    for (Linear* l : s)
      if (std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
  }
  // Freeze the base first: the adapters attached below stay trainable.
  for (auto& [name, p] : model.namedParameters()) p.setRequiresGrad(false);
  Rng rng(seed * 0x9E3779B97F4A7C15ull + 0x10AA);
  for (Linear* l : layers) {
    const int64_t out = l->weight.shape()[0], in = l->weight.shape()[1];
    auto a = std::make_shared<Linear>(in, o.rank, rng, false);  // torch default init (peft's A)
    auto b = std::make_shared<Linear>(o.rank, out, rng, false);
    init::constant(b->weight.data(), 0.f);
    l->attachLowRank(a, b, static_cast<float>(o.scale()));
  }
  return static_cast<int>(layers.size());
}

bool isLoraParameter(const std::string& name) {
  return name.ends_with(kA) || name.ends_with(kB);
}

std::vector<std::pair<std::string, Variable>> trainableParameters(const Module& model) {
  std::vector<std::pair<std::string, Variable>> out;
  for (auto& [name, p] : model.namedParameters())
    if (p.requiresGrad()) out.emplace_back(name, p);
  return out;
}

int64_t trainableParameterCount(const Module& model) {
  int64_t n = 0;
  for (auto& [name, p] : trainableParameters(model)) n += p.numel();
  return n;
}

void mergeLora(std::vector<std::pair<std::string, Tensor>>& tensors, double scale) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) index[tensors[i].first] = i;
  std::vector<std::pair<std::string, Tensor>> kept;
  for (auto& [name, t] : tensors) {
    if (name.ends_with(kB)) continue;  // merged with its A
    if (!name.ends_with(kA)) {
      kept.emplace_back(name, t);
      continue;
    }
    const std::string layer = name.substr(0, name.size() - kA.size());
    auto b = index.find(layer + kB);
    auto w = index.find(layer + ".weight");
    DTRAIN_CHECK(b != index.end(), "merging LoRA: ", name, " has no ", layer + kB);
    DTRAIN_CHECK(w != index.end(), "merging LoRA: ", name, " has no base weight ", layer, ".weight");
    Tensor a = t.contiguous(), bt = tensors[b->second].second.contiguous();
    Tensor& base = tensors[w->second].second;
    DTRAIN_CHECK(a.dim() == 2 && bt.dim() == 2 && base.dim() == 2 && a.size(0) == bt.size(1) &&
                     base.size(0) == bt.size(0) && base.size(1) == a.size(1),
                 "merging LoRA: ", layer, ": A ", shapeStr(a.shape()), ", B ", shapeStr(bt.shape()),
                 " do not fit the weight ", shapeStr(base.shape()));
    // W += scale * B A, in double for the sum over the rank (r is small).
    Tensor merged = base.contiguous().clone();
    const int64_t out = base.size(0), in = base.size(1), r = a.size(0);
    const float* A = a.data<float>();
    const float* B = bt.data<float>();
    float* W = merged.data<float>();
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < in; ++j) {
        double s = 0;
        for (int64_t k = 0; k < r; ++k) s += double(B[i * r + k]) * A[k * in + j];
        W[i * in + j] += static_cast<float>(scale * s);
      }
    base = merged;
  }
  // Base weights were replaced in `tensors`; refresh the kept copies.
  for (auto& [name, t] : kept) t = tensors[index.at(name)].second;
  tensors = std::move(kept);
}

}  // namespace dtrain::nn
