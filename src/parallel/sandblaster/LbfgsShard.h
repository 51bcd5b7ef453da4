#pragma once
// One parameter-server shard of Sandblaster (ShardProtocol.h): it holds a
// slice of the parameters and of the L-BFGS vectors, answers the workers'
// parameter pulls, collects their unit gradients, and runs the coordinator's
// vector operations on its slice. Runs until the coordinator says kDone.
#include <cstdint>

#include "comm/Communicator.h"

namespace dtrain::parallel::sandblaster {

struct ShardStats {
  int64_t pulls = 0;        // parameter slices sent to workers
  int64_t unitGrads = 0;    // unit gradient slices kept (first copy of a unit)
  int64_t dropped = 0;      // copies of units already in, or of an older evaluation
};

// `params`: the model's parameter count; shards are comm ranks 1..servers,
// workers servers+1..size-1.
ShardStats runSandblasterShard(comm::Communicator& comm, int servers, int64_t params);

}  // namespace dtrain::parallel::sandblaster
