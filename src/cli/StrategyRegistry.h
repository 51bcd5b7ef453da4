#pragma once
// The strategies `dtrain train` can run, by name: each entry says how many
// ranks it needs and builds one rank's part. A new strategy is one entry in
// StrategyRegistry.cpp, not a branch in the rank runner.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/Strategy.h"
#include "runtime/TrainConfig.h"

namespace dtrain::cli {

struct SharedRun;

struct StrategyEntry {
  // Ranks of the communicator the strategy needs (workers, plus servers for ps).
  std::function<int(const runtime::TrainConfig&)> worldSize;
  // This rank's strategy, or null when the rank does not train (a parameter
  // server: the factory runs its loop to the end before returning).
  std::function<std::unique_ptr<parallel::Strategy>(const runtime::TrainConfig&,
                                                    comm::Communicator&, const SharedRun&)>
      make;
};

// Throws UsageError naming the known strategies on an unknown name.
const StrategyEntry& strategyEntry(const std::string& name);

}  // namespace dtrain::cli
