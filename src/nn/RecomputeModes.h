#pragma once
// --recompute none|blocks|all: which modules run under activation
// recomputation (autograd/Recompute.h).
//   blocks: each layer of every Sequential (gpt: each transformer block,
//           transformer.h.<i>; mlp and lenet: each layer): one input kept per
//           block, a block's activations alive only during its own backward.
//   all:    one level finer: each child of such a block (gpt: ln_1, attn, ln_2,
//           mlp of every block; a block without children is itself the unit).
//           Keeps the few sub-layer inputs and recomputes each sub-layer alone.
//   none:   everything recorded once (the default).
#include <string>
#include <vector>

#include "nn/Module.h"

namespace dtrain::nn {

const std::vector<std::string>& recomputeModeNames();
// Throws UsageError naming the modes on an unknown one.
void checkRecomputeMode(const std::string& mode);
// Marks the modules of `mode` (and unmarks the others); returns how many are marked.
int applyRecompute(Module& model, const std::string& mode);
// The model's blocks, in forward order: every child of a Sequential anywhere
// in the tree (gpt: each transformer block; mlp and lenet: each layer). The
// units of --recompute blocks and of ZeRO-3's parameter gathering.
std::vector<Module*> sequentialBlocks(Module& model);

}  // namespace dtrain::nn
