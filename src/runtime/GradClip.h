#pragma once
// Clipping by the global gradient norm (torch.nn.utils.clip_grad_norm_): when
// the norm of all gradients together exceeds maxNorm, every gradient is scaled
// by maxNorm / (norm + 1e-6). The norm comes from the strategy, so that
// sharded strategies sum it over their shards.
#include "nn/Module.h"
#include "parallel/Strategy.h"

namespace dtrain::runtime {

// Clips the gradients of `model` in place; returns the norm before clipping.
double clipGradNorm(nn::Module& model, parallel::Strategy& strategy, double maxNorm);

}  // namespace dtrain::runtime
