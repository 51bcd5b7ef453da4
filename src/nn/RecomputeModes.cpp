#include "nn/RecomputeModes.h"

#include <functional>
#include <utility>

#include "core/Error.h"
#include "core/NameRegistry.h"
#include "nn/Layers.h"

namespace dtrain::nn {
namespace {

// Calls fn on every block: every child of a Sequential anywhere in the tree.
void forEachBlock(Module& m, const std::function<void(Module&)>& fn) {
  const bool sequential = dynamic_cast<Sequential*>(&m) != nullptr;
  for (const auto& [name, child] : m.children()) {
    if (sequential) fn(*child);
    else forEachBlock(*child, fn);
  }
}

void clearAll(Module& m) {
  m.setRecompute(false);
  for (const auto& [name, child] : m.children()) clearAll(*child);
}

using Marker = std::function<int(Module&)>;

// The modes, each a rule for which modules to mark.
const NameRegistry<Marker>& modes() {
  static const NameRegistry<Marker> m("--recompute", {
      {"none", [](Module&) { return 0; }},
      {"blocks",
       [](Module& model) {
         int n = 0;
         forEachBlock(model, [&](Module& block) {
           block.setRecompute(true);
           ++n;
         });
         return n;
       }},
      {"all",
       [](Module& model) {
         int n = 0;
         forEachBlock(model, [&](Module& block) {
           if (block.children().empty()) {
             block.setRecompute(true);
             ++n;
           }
           for (const auto& [name, part] : block.children()) {
             part->setRecompute(true);
             ++n;
           }
         });
         return n;
       }}});
  return m;
}

}  // namespace

const std::vector<std::string>& recomputeModeNames() {
  static const std::vector<std::string> names = modes().names();
  return names;
}

void checkRecomputeMode(const std::string& mode) { modes().find(mode); }

std::vector<Module*> sequentialBlocks(Module& model) {
  std::vector<Module*> out;
  forEachBlock(model, [&](Module& block) { out.push_back(&block); });
  return out;
}

int applyRecompute(Module& model, const std::string& mode) {
  const Marker& rule = modes().find(mode);
  clearAll(model);
  return rule(model);
}

}  // namespace dtrain::nn
