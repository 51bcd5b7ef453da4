#pragma once
// Activation recomputation (gradient checkpointing, Chen et al. 2016): run a
// piece of the model without recording its graph, keep only its input, and
// during backward run it again with recording on and backpropagate through
// that fresh graph. The activations inside the piece live only while its own
// backward runs, for the price of one more forward of it.
//
// The recomputed forward runs with the precision (autograd/Precision.h) the
// first one ran with, so it produces the same bits; the function must be
// deterministic (no dropout: gpt and mlp have none). Gradients equal those
// without recomputation bit for bit (tests/autograd/RecomputeTest.cpp).
// Parameters the function uses get their gradients (and their grad-ready
// hooks fire) during the recomputed backward, as they would without it.
#include <functional>

#include "autograd/Variable.h"

namespace dtrain::autograd {

using Forward = std::function<Variable(const Variable&)>;

// fn(x), recording one node that recomputes fn during backward. Without grad
// mode it is just fn(x). `fn` must stay callable until backward has run.
Variable recompute(const Forward& fn, const Variable& x);

// True on this thread while a recompute node re-runs its function in backward:
// layers with state that forward updates (BatchNorm's running statistics)
// leave it alone, since the first forward already updated it.
bool recomputing();

}  // namespace dtrain::autograd
