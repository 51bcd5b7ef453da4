#include "nn/ModelRegistry.h"

#include <utility>

#include "core/Error.h"
#include "core/NameRegistry.h"
#include "nn/Gpt.h"
#include "nn/Models.h"

namespace dtrain::nn {

namespace {

using Entries = std::vector<std::pair<std::string, ModelEntry>>;

void rejectOverrides(const std::string& name, const ModelOverrides& o) {
  DTRAIN_CHECK_USAGE(!o.any(), "--n-layer, --n-head, --n-embd and --block-size apply to the gpt "
                     "models, not to --model ", name);
}

GptConfig resolveGpt(const std::string& name, const ModelOverrides& o) {
  GptConfig c = gptConfig(name);
  c.nLayer = o.nLayer.value_or(c.nLayer);
  c.nHead = o.nHead.value_or(c.nHead);
  c.nEmbd = o.nEmbd.value_or(c.nEmbd);
  c.blockSize = o.blockSize.value_or(c.blockSize);
  DTRAIN_CHECK_USAGE(c.nLayer > 0 && c.nHead > 0 && c.nEmbd > 0 && c.blockSize > 0,
                     "--n-layer, --n-head, --n-embd and --block-size must be positive (got ",
                     c.nLayer, ", ", c.nHead, ", ", c.nEmbd, ", ", c.blockSize, ")");
  DTRAIN_CHECK_USAGE(c.nEmbd % c.nHead == 0, "--n-embd ", c.nEmbd,
                     " must be divisible by --n-head ", c.nHead);
  return c;
}

const NameRegistry<ModelEntry>& registry() {
  static const NameRegistry<ModelEntry> r("model", [] {
    Entries out;
    for (const std::string& name : modelNames())
      out.emplace_back(name, ModelEntry{
          [name](const ModelOverrides& o) {
            rejectOverrides(name, o);
            return ModelInfo{kClassificationTask, 0, 0};
          },
          [name](const ModelOverrides& o, uint64_t seed) -> std::shared_ptr<Module> {
            rejectOverrides(name, o);
            return makeModel(name, seed);
          }});
    for (const std::string& name : gptPresetNames())
      out.emplace_back(name, ModelEntry{
          [name](const ModelOverrides& o) {
            const GptConfig c = resolveGpt(name, o);
            return ModelInfo{kLanguageModelTask, c.blockSize, c.vocab};
          },
          [name](const ModelOverrides& o, uint64_t seed) -> std::shared_ptr<Module> {
            return makeGpt(resolveGpt(name, o), seed);
          }});
    return out;
  }());
  return r;
}

const ModelEntry& entry(const std::string& name) { return registry().find(name); }

}  // namespace

const std::vector<std::string>& registeredModelNames() {
  static const std::vector<std::string> names = registry().names();
  return names;
}

ModelInfo modelInfo(const std::string& name, const ModelOverrides& overrides) {
  return entry(name).info(overrides);
}

std::shared_ptr<Module> buildModel(const std::string& name, const ModelOverrides& overrides,
                                   uint64_t seed) {
  return entry(name).make(overrides, seed);
}

}  // namespace dtrain::nn
