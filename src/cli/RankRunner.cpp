#include "cli/RankRunner.h"

#include "core/Error.h"
#include "nn/ModelRegistry.h"
#include "parallel/allreduce/DataParallel.h"
#include "parallel/ps/Server.h"
#include "parallel/ps/Worker.h"
#include "parallel/zero/ZeroDataParallel.h"

namespace dtrain::cli {

namespace {

parallel::DataParallelOptions dataParallelOptions(const runtime::TrainConfig& c,
                                                  comm::Communicator& comm) {
  parallel::DataParallelOptions o;
  o.fusionMb = c.fusionMb;
  o.overlap = c.overlap;
  o.algo = comm::algorithmFromName(c.allreduceAlgo);
  o.compress = runtime::compressOptions(c);
  DTRAIN_CHECK_USAGE(comm.supports(o.algo), "--allreduce-algo ", c.allreduceAlgo,
                     " is not available on the ", comm.backend(), " backend");
  return o;
}

std::optional<runtime::TrainResult> train(const runtime::TrainConfig& c,
                                          std::unique_ptr<parallel::Strategy> strategy,
                                          const SharedRun& shared) {
  const bool reporter = strategy->isReporter();
  runtime::Trainer trainer(c, std::move(strategy));
  trainer.setData(shared.data);
  if (shared.timeline) trainer.setTimeline(shared.timeline);
  runtime::TrainResult r = trainer.run();
  if (!reporter) return std::nullopt;
  return r;
}

}  // namespace

int worldSizeFor(const runtime::TrainConfig& c) {
  return c.strategy == "ps" ? c.servers + c.workers : c.workers;
}

std::optional<runtime::TrainResult> runRank(const runtime::TrainConfig& c, comm::Communicator& comm,
                                            const SharedRun& shared) {
  DTRAIN_CHECK(comm.size() == worldSizeFor(c), "runRank: ", comm.size(), " ranks for ",
               worldSizeFor(c), " (servers + workers)");
  if (c.strategy == "ps") {
    auto opts = runtime::psOptions(c, comm.rank());
    if (comm.rank() < c.servers) {
      // The model only gives the servers the parameter names and shapes.
      auto model = nn::buildModel(c.model, runtime::modelOverrides(c), c.seed);
      parallel::ps::ParameterServer server(comm, *model, opts);
      server.run();
      return std::nullopt;
    }
    return train(c, std::make_unique<parallel::ps::PsWorker>(comm, opts), shared);
  }
  if (c.strategy == "hogwild") {
    DTRAIN_CHECK(shared.hogwild, "--strategy hogwild: no shared parameter set");
    return train(c, std::make_unique<parallel::Hogwild>(comm, shared.hogwild), shared);
  }
  if (c.zero > 0) {  // ZeRO (issue 14)
    parallel::zero::ZeroOptions z;
    z.stage = c.zero;
    z.fusionMb = c.fusionMb;
    z.optimizer = c.optimizer;
    z.optimizerOptions = runtime::optimizerOptions(c);
    return train(c, std::make_unique<parallel::zero::ZeroDataParallel>(comm, std::move(z)), shared);
  }
  return train(c, std::make_unique<parallel::DataParallel>(comm, dataParallelOptions(c, comm)),
               shared);
}

}  // namespace dtrain::cli
