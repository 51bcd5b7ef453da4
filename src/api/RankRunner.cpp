#include "api/RankRunner.h"

#include "api/StrategyRegistry.h"
#include "core/Error.h"

namespace dtrain::api {

namespace {

std::optional<runtime::TrainResult> train(const runtime::TrainConfig& c,
                                          std::unique_ptr<parallel::Strategy> strategy,
                                          const SharedRun& shared) {
  const bool reporter = strategy->isReporter();
  runtime::Trainer trainer(c, std::move(strategy), shared.data);
  if (shared.timeline) trainer.setTimeline(shared.timeline);
  runtime::TrainResult r = trainer.run();
  if (!reporter) return std::nullopt;
  return r;
}

}  // namespace

int worldSizeFor(const runtime::TrainConfig& c) { return strategyEntry(c.strategy).worldSize(c); }

std::optional<runtime::TrainResult> runRank(const runtime::TrainConfig& c, comm::Communicator& comm,
                                            const SharedRun& shared) {
  DTRAIN_CHECK(comm.size() == worldSizeFor(c), "runRank: ", comm.size(), " ranks for ",
               worldSizeFor(c), " (servers + workers)");
  // The strategy registry (StrategyRegistry.cpp) builds this rank's part.
  auto strategy = strategyEntry(c.strategy).make(c, comm, shared);
  if (!strategy) return std::nullopt;  // a rank that served, not trained
  return train(c, std::move(strategy), shared);
}

}  // namespace dtrain::api
