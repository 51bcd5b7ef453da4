#pragma once
// How Sandblaster's ranks wait. The coordinator's and the shards' polling
// loops test one posted receive per peer (there is no any-source receive) and
// must not burn a core the workers need while nothing arrives: yield first,
// then sleeps growing to 200 us. And a rank may wait for a peer however long
// (a worker or shard idles while the coordinator's trainer evaluates or
// checkpoints, an evaluation's end waits for the slowest unit): no deadline.
#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/Work.h"

namespace dtrain::parallel::sandblaster {

// Waits for `w` without a deadline; an aborted world still throws.
inline void waitLong(comm::Work& w) {
  while (!w.waitFor(std::chrono::milliseconds(200))) {
  }
}

class PollBackoff {
 public:
  void progressed() { idle_ = 0; }
  void nothingArrived() {
    if (++idle_ < 32)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, 10 * (idle_ - 31))));
  }

 private:
  int idle_ = 0;
};

}  // namespace dtrain::parallel::sandblaster
