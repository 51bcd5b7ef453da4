#pragma once
// The coordinator's and the shards' polling loops test one posted receive per
// peer (there is no any-source receive) and must not burn a core the workers
// need while nothing arrives: yield first, then sleeps growing to 200 us.
#include <algorithm>
#include <chrono>
#include <thread>

namespace dtrain::parallel::sandblaster {

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
