#pragma once
// The registry of built-in models the trainer and the CLI build by name: the
// Fashion-MNIST classifiers (mlp, lenet; nn/Models.h; resnet-20/32/56, with
// BatchNorm; nn/ResNet.h) and the byte-level GPTs
// (gpt-tiny, gpt-small, gpt-base; nn/Gpt.h). Each entry names the task that
// trains it ("classification", "language-model"), so a new model is one entry
// here, not a branch in the trainer.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/Module.h"

namespace dtrain::nn {

inline constexpr const char* kClassificationTask = "classification";
inline constexpr const char* kLanguageModelTask = "language-model";

// Architecture overrides of a preset (--n-layer --n-head --n-embd --block-size);
// only models with these knobs (the GPTs) accept them.
struct ModelOverrides {
  std::optional<int64_t> nLayer, nHead, nEmbd, blockSize;
  bool any() const { return nLayer || nHead || nEmbd || blockSize; }
  // mlp only (--mlp-hidden): its hidden widths; empty: 256, 256.
  std::vector<int64_t> mlpHidden;
};

// What a classifier is built for: the data's sample shape and class count. The
// default is Fashion-MNIST's, the shape the built-ins were designed for; the
// mlp takes any (its first Linear gets the features, its last the classes),
// lenet only 1x28x28 or 3x28x28 images; the language models ignore it.
struct DataShape {
  Shape sample{1, 28, 28};
  int64_t classes = 10;
};

// What the trainer needs to know about a model besides its parameters.
struct ModelInfo {
  std::string task;        // kClassificationTask or kLanguageModelTask
  int64_t blockSize = 0;   // language models: context length (tokens)
  int64_t vocab = 0;       // language models: vocabulary size
};

struct ModelEntry {
  std::function<ModelInfo(const ModelOverrides&)> info;
  std::function<std::shared_ptr<Module>(const ModelOverrides&, uint64_t seed, const DataShape&)>
      make;
};

// Every registered model name, in registration order (the built-ins first).
std::vector<std::string> registeredModelNames();

// Adds a program's own model under `name`, so that every strategy, config file
// and `--model name` can build it (call before training; not thread-safe).
// Throws UsageError for a name already taken.
void registerModel(const std::string& name, ModelEntry entry);
// Removes a program's own model (the Python bindings register a script's model
// for one run); false when no model has that name. Built-ins stay.
bool unregisterModel(const std::string& name);
// The entry of a classifier built from the data's shape (sample shape and
// classes) and a seed: what a user's model needs to register.
ModelEntry classifier(std::function<std::shared_ptr<Module>(const DataShape& data, uint64_t seed)> make);
// Throws UsageError naming the known models on an unknown name, and for
// overrides a model does not have or that are invalid (e.g. heads not dividing
// the width), and for data a classifier cannot take (lenet: 1x28x28 images).
ModelInfo modelInfo(const std::string& name, const ModelOverrides& overrides = {});
std::shared_ptr<Module> buildModel(const std::string& name, const ModelOverrides& overrides,
                                   uint64_t seed, const DataShape& data = {});

}  // namespace dtrain::nn
