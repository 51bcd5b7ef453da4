#include "runtime/LoraSetup.h"

#include <cmath>
#include <sstream>

#include "core/Error.h"
#include "core/Log.h"
#include "nn/RecomputeModes.h"
#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"

namespace dtrain::runtime {
void validateMemoryOptions(const TrainConfig& c) {
  nn::checkRecomputeMode(c.recompute);
  if (!c.loraRank) {
    for (const auto& [flag, given] :
         {std::pair<const char*, bool>{"--lora-alpha", c.loraAlpha.has_value()},
          {"--lora-targets", !c.loraTargets.empty()},
          {"--save-adapters", !c.saveAdapters.empty()},
          {"--load-adapters", !c.loadAdapters.empty()}})
      DTRAIN_CHECK_USAGE(!given, flag, " needs --lora-rank R (LoRA is off without it)");
    return;
  }
  DTRAIN_CHECK_USAGE(*c.loraRank > 0, "--lora-rank must be positive (got ", *c.loraRank, ")");
  DTRAIN_CHECK_USAGE(!c.loraAlpha || (std::isfinite(*c.loraAlpha) && *c.loraAlpha > 0),
                     "--lora-alpha must be a positive finite number (got ", c.loraAlpha.value_or(0),
                     ")");
  if (!c.loraTargets.empty()) nn::parseLoraTargets(c.loraTargets);
}

nn::LoraOptions loraOptions(const TrainConfig& c, nn::Module& model) {
  nn::LoraOptions o;
  if (!c.loraRank) return o;
  o.rank = *c.loraRank;
  if (c.loraAlpha) o.alpha = *c.loraAlpha;
  o.targets = c.loraTargets.empty() ? nn::loraTargetsOf(model, c.model)
                                    : nn::parseLoraTargets(c.loraTargets);
  DTRAIN_CHECK_USAGE(!o.targets.empty(), "--lora-rank: model ", c.model,
                     " has no LoRA targets (known: attn, mlp)");
  return o;
}

std::map<std::string, std::string> loraMetadata(const TrainConfig& c) {
  if (!c.loraRank) return {};
  std::ostringstream alpha;
  alpha.precision(17);
  alpha << c.loraAlpha.value_or(nn::LoraOptions{}.alpha);
  return {{"lora_rank", std::to_string(*c.loraRank)},
          {"lora_alpha", alpha.str()},
          {"lora_targets", c.loraTargets}};
}

double loraScaleFromMetadata(const std::map<std::string, std::string>& meta,
                             const std::string& file) {
  auto r = meta.find("lora_rank"), a = meta.find("lora_alpha");
  DTRAIN_CHECK(r != meta.end() && a != meta.end(), file,
               ": no lora_rank and lora_alpha in its metadata (not written by a LoRA run)");
  try {
    const double rank = std::stod(r->second), alpha = std::stod(a->second);
    if (rank > 0 && std::isfinite(alpha)) return alpha / rank;
  } catch (const std::exception&) {
  }
  throw Error(detail::concat(file, ": bad lora_rank '", r->second, "' or lora_alpha '", a->second,
                             "' in its metadata"));
}

void saveAdapters(const std::string& path, const TrainConfig& c, nn::Module& model) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, p] : model.namedParameters())
    if (nn::isLoraParameter(name)) tensors.emplace_back(name, p.data());
  auto meta = loraMetadata(c);
  meta["model"] = c.model;
  saveSafetensors(path, tensors, meta);
}

void loadAdapters(const std::string& path, nn::Module& model) {
  SafetensorsFile f = loadSafetensors(path);
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  for (auto& [name, p] : model.namedParameters()) {
    if (!nn::isLoraParameter(name)) continue;
    const Tensor* t = f.find(name);
    DTRAIN_CHECK(t, "adapters ", path, ": missing ", name);
    DTRAIN_CHECK(t->shape() == p.data().shape() && t->dtype() == DType::F32, "adapters ", path,
                 ": ", name, " has shape ", shapeStr(t->shape()), ", the model expects ",
                 shapeStr(p.data().shape()), " (same --lora-rank and targets?)");
    copies.emplace_back(&p.data(), t);
  }
  DTRAIN_CHECK(copies.size() == f.tensors.size(), "adapters ", path, ": holds ", f.tensors.size(),
               " tensors, the model has ", copies.size(), " adapter tensors");
  for (auto& [into, from] : copies) into->copyFrom(*from);
}

}  // namespace dtrain::runtime
