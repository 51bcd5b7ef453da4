#include "nn/LayerSequence.h"

#include "core/Error.h"
#include "nn/Gpt.h"

namespace dtrain::nn {

std::vector<SequenceLayer> layerSequence(Module& model) {
  std::vector<SequenceLayer> out;
  if (auto* gpt = dynamic_cast<Gpt*>(&model)) {
    auto t = gpt->transformer;
    out.push_back({"embedding", [t](const Variable& x) { return t->embed(x); },
                   {{"transformer.wte", t->wte}, {"transformer.wpe", t->wpe}}});
    for (const auto& [index, block] : t->h->children()) {
      const std::string name = "transformer.h." + index;
      out.push_back({name, [b = block](const Variable& x) { return (*b)(x); }, {{name, block}}});
    }
    out.push_back({"head",
                   [gpt, t](const Variable& x) { return gpt->head((*t->lnF)(x)); },
                   {{"transformer.ln_f", t->lnF}, {"transformer.wte", t->wte}}});
    return out;
  }
  if (auto* seq = dynamic_cast<Sequential*>(&model)) {
    for (const auto& [name, layer] : seq->children())
      out.push_back({name, [l = layer](const Variable& x) { return (*l)(x); }, {{name, layer}}});
    return out;
  }
  throw UsageError("this model is not a sequence of layers: a pipeline cannot cut it");
}

bool isLayerSequence(const Module& model) {
  return dynamic_cast<const Gpt*>(&model) || dynamic_cast<const Sequential*>(&model);
}

void ModuleGroup::add(const std::string& name, std::shared_ptr<Module> module) {
  for (const auto& [n, m] : children())
    if (m == module) return;
  registerModule(name, std::move(module));
}

Variable ModuleGroup::forward(const Variable&) {
  throw Error("ModuleGroup only groups parameters; it has no forward");
}

}  // namespace dtrain::nn
