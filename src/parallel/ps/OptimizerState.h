#pragma once
// The optimizer state of each parameter as namedState() lays it out (per
// parameter: "step", then slotNames()), addressed by parameter index: what
// servers and worker 0 copy shard by shard (start from a checkpoint, gather
// for one).
#include <vector>

#include "optim/Optimizer.h"

namespace dtrain::parallel::ps {

struct ParamState {
  Tensor* step;                // I64 [1]
  std::vector<Tensor*> slots;  // slotNames() order
};

// Allocates the state first (fresh values) where it does not exist yet.
std::vector<ParamState> paramStates(optim::Optimizer& optimizer);

}  // namespace dtrain::parallel::ps
