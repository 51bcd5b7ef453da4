#pragma once
// --strategy sandblaster's options as the run configuration holds them
// ([sandblaster] in config files; TrainConfig::strategyOptions.get<SandblasterConfig>()).
// The spec (SandblasterSpec.cpp) turns them into the strategy's SandblasterOptions.
#include <cstdint>
#include <string>

namespace dtrain::parallel::sandblaster {

struct SandblasterConfig {
  int64_t servers = 0;            // parameter shards; 0: the coordinator holds all
  int64_t workUnits = 0;          // units per batch gradient; 0: 4 per worker
  bool backupTasks = true;        // re-issue the last pending units to free workers
  std::string data = "workers";   // who reads a unit's samples: workers, coordinator
};

}  // namespace dtrain::parallel::sandblaster
