#include "nn/ModelRegistry.h"

#include <utility>

#include "core/Error.h"
#include "nn/Gpt.h"
#include "nn/Models.h"
#include "nn/ResNet.h"

namespace dtrain::nn {

namespace {

using Registry = std::vector<std::pair<std::string, ModelEntry>>;

void rejectOverrides(const std::string& name, const ModelOverrides& o) {
  DTRAIN_CHECK_USAGE(!o.any(), "--n-layer, --n-head, --n-embd and --block-size apply to the gpt "
                     "models, not to --model ", name);
  DTRAIN_CHECK_USAGE(o.mlpHidden.empty() || name == "mlp", "--mlp-hidden applies to --model mlp, "
                     "not to --model ", name);
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

// The built-ins first; registerModel() appends a program's own models.
Registry& registry() {
  static Registry r = [] {
    Registry out;
    // A built-in classifier: no gpt overrides, --mlp-hidden for the mlp only.
    auto addClassifier = [&out](const std::string& name, auto make) {
      out.emplace_back(name, ModelEntry{
          [name](const ModelOverrides& o) {
            rejectOverrides(name, o);
            return ModelInfo{kClassificationTask, 0, 0};
          },
          [name, make](const ModelOverrides& o, uint64_t seed,
                       const DataShape& data) -> std::shared_ptr<Module> {
            rejectOverrides(name, o);
            return make(o, seed, data);
          }});
    };
    for (const std::string& name : modelNames())
      addClassifier(name, [name](const ModelOverrides& o, uint64_t seed, const DataShape& data) {
        return makeModel(name, seed, data, o.mlpHidden);
      });
    for (const std::string& name : resnetNames())
      addClassifier(name, [name](const ModelOverrides&, uint64_t seed, const DataShape& data) {
        return makeResNet(name, seed, data);
      });
    for (const std::string& name : gptPresetNames())
      out.emplace_back(name, ModelEntry{
          [name](const ModelOverrides& o) {
            DTRAIN_CHECK_USAGE(o.mlpHidden.empty(), "--mlp-hidden applies to --model mlp, not to --model ", name);
            const GptConfig c = resolveGpt(name, o);
            return ModelInfo{kLanguageModelTask, c.blockSize, c.vocab};
          },
          // Text: the vocabulary and the context come from the preset, not the data.
          [name](const ModelOverrides& o, uint64_t seed,
                 const DataShape&) -> std::shared_ptr<Module> {
            return makeGpt(resolveGpt(name, o), seed);
          }});
    return out;
  }();
  return r;
}

const ModelEntry& entry(const std::string& name) {
  for (const auto& [n, e] : registry())
    if (n == name) return e;
  std::string known;
  for (const auto& [n, e] : registry()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace

std::vector<std::string> registeredModelNames() {
  std::vector<std::string> names;
  for (const auto& [name, e] : registry()) names.push_back(name);
  return names;
}

void registerModel(const std::string& name, ModelEntry entry) {
  DTRAIN_CHECK_USAGE(!name.empty() && name.find_first_of(" \t\n\"'") == std::string::npos,
                     "registerModel: '", name, "' is not a usable model name");
  for (const auto& [n, e] : registry())
    DTRAIN_CHECK_USAGE(n != name, "registerModel: a model named '", name, "' is already registered");
  DTRAIN_CHECK_USAGE(entry.info && entry.make, "registerModel: '", name, "' needs info and make");
  registry().emplace_back(name, std::move(entry));
}

bool unregisterModel(const std::string& name) {
  auto& r = registry();
  for (auto it = r.begin(); it != r.end(); ++it)
    if (it->first == name) {
      r.erase(it);
      return true;
    }
  return false;
}

ModelEntry classifier(std::function<std::shared_ptr<Module>(const DataShape& data, uint64_t seed)> make) {
  return ModelEntry{
      [](const ModelOverrides& o) {
        DTRAIN_CHECK_USAGE(!o.any() && o.mlpHidden.empty(), "--n-layer, --n-head, --n-embd, "
                           "--block-size and --mlp-hidden apply to the built-in models, not to a "
                           "registered classifier");
        return ModelInfo{kClassificationTask, 0, 0};
      },
      [make = std::move(make)](const ModelOverrides&, uint64_t seed, const DataShape& data) {
        return make(data, seed);
      }};
}

ModelInfo modelInfo(const std::string& name, const ModelOverrides& overrides) {
  return entry(name).info(overrides);
}

std::shared_ptr<Module> buildModel(const std::string& name, const ModelOverrides& overrides,
                                   uint64_t seed, const DataShape& data) {
  return entry(name).make(overrides, seed, data);
}

}  // namespace dtrain::nn
