#pragma once
// One rank's part of a distributed run, whatever the strategy: a parameter
// server's loop, or a trainer with the strategy's worker side. Used by the
// local launcher (ranks as threads) and by each process under mpirun.
#include <memory>
#include <optional>

#include "comm/Communicator.h"
#include "data/Dataset.h"
#include "parallel/hogwild/Hogwild.h"
#include "runtime/Timeline.h"
#include "runtime/Trainer.h"

namespace dtrain::api {

// What the ranks of one process share.
struct SharedRun {
  runtime::TaskData data;                            // null members: each rank loads its own
  runtime::Timeline* timeline = nullptr;             // null: no timeline
  std::shared_ptr<parallel::HogwildShared> hogwild;  // --strategy hogwild
};

// Ranks of the communicator a strategy needs: workers, plus servers for ps.
int worldSizeFor(const runtime::TrainConfig& c);

// Runs this rank; returns the result on the reporting rank (the first worker),
// nullopt on the others.
std::optional<runtime::TrainResult> runRank(const runtime::TrainConfig& c, comm::Communicator& comm,
                                            const SharedRun& shared);

}  // namespace dtrain::api
