#pragma once
// Checkpoints of strategies whose ranks hold different state between steps
// (local SGD between syncs, gossip): every rank's tensors of the same names,
// dtypes and shapes, gathered to rank 0 as "rank<r>.<name>".
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/Communicator.h"
#include "tensor/Tensor.h"

namespace dtrain::parallel {

using NamedState = std::vector<std::pair<std::string, Tensor*>>;

// Collective: one allgather of every rank's bytes. Rank 0 gets the map, the others an empty one.
std::map<std::string, Tensor> gatherRankState(comm::Communicator& comm, const NamedState& mine, int tag);

}  // namespace dtrain::parallel
