#pragma once
// A model as a sequence of layers, the unit a pipeline cuts into stages:
//   Sequential models (mlp, lenet): their layers, named "0", "1", ...;
//   gpt: "embedding" (wte + wpe), each block "transformer.h.<i>", and "head"
//   (ln_f, then lm_head, which is wte again: the tie spans the first and the
//   last layer, so a pipeline keeps wte on both its first and last stage).
// Layer i's forward takes layer i-1's output (layer 0: the model's input);
// chaining them all is the model's forward.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/Module.h"

namespace dtrain::nn {

struct SequenceLayer {
  std::string name;
  std::function<Variable(const Variable&)> forward;
  // The modules holding the layer's parameters, under their names in the
  // model ("transformer.h.0", "transformer.wte"); a module may appear in
  // several layers (tied weights).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules;
};

// The layers of `model` (which must outlive them). Throws UsageError for a
// model that is not a sequence of layers.
std::vector<SequenceLayer> layerSequence(Module& model);
// Whether layerSequence(model) has layers to give (gpt, Sequential models).
bool isLayerSequence(const Module& model);

// A module whose children are the given (name, module) pairs, each module
// once: namedParameters() lists their parameters under the model's names.
class ModuleGroup final : public Module {
 public:
  void add(const std::string& name, std::shared_ptr<Module> module);
  Variable forward(const Variable&) override;
  std::string describe() const override { return "ModuleGroup"; }
  // A stage's layers in order: Linear -> activation -> Linear runs within the
  // stage pair up (nn/TensorParallelLayers.h).
  void tensorParallelize(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                         TensorParallelPlan& plan) override {
    tensorParallelizeLayers(children(), prefix, group, plan);
  }
};

}  // namespace dtrain::nn
