#include "runtime/TrainConfig.h"

#include <cmath>
#include <string>

#include "comm/Types.h"
#include "core/Error.h"

namespace dtrain::runtime {

void TrainConfig::validate() const {
  DTRAIN_CHECK_USAGE(batchSize > 0, "--batch-size must be positive (got ", batchSize, ")");
  DTRAIN_CHECK_USAGE(epochs > 0, "--epochs must be positive (got ", epochs, ")");
  DTRAIN_CHECK_USAGE(maxSteps >= 0, "--max-steps must be >= 0 (got ", maxSteps, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(lr) && lr > 0, "--lr must be a positive finite number (got ",
                     lr, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(weightDecay) && weightDecay >= 0,
                     "--weight-decay must be a finite number >= 0 (got ", weightDecay, ")");
  DTRAIN_CHECK_USAGE(threads >= 1 && threads <= 1024, "--threads must be in [1, 1024] (got ",
                     threads, ")");
  DTRAIN_CHECK_USAGE(evalEvery >= 0, "--eval-every must be >= 0 (got ", evalEvery, ")");
  DTRAIN_CHECK_USAGE(logEvery > 0, "--log-every must be positive (got ", logEvery, ")");
  DTRAIN_CHECK_USAGE(prefetch >= 0, "--prefetch must be >= 0 (got ", prefetch, ")");
  DTRAIN_CHECK_USAGE(syntheticSize > 0, "--synthetic-size must be positive (got ", syntheticSize,
                     ")");
  DTRAIN_CHECK_USAGE(dataset == "fashion-mnist" || dataset == "synthetic", "unknown --dataset '",
                     dataset, "' (known: fashion-mnist, synthetic)");
  DTRAIN_CHECK_USAGE(warmupSteps >= 0, "--warmup-steps must be >= 0 (got ", warmupSteps, ")");
  DTRAIN_CHECK_USAGE(workers >= 1, "--workers must be >= 1 (got ", workers, ")");
  DTRAIN_CHECK_USAGE(strategy.empty() || strategy == "single" || strategy == "allreduce",
                     "unknown --strategy '", strategy, "' (known: allreduce, single)");
  DTRAIN_CHECK_USAGE(backend == "local" || backend == "mpi", "unknown --backend '", backend,
                     "' (known: local, mpi)");
  DTRAIN_CHECK_USAGE(!(strategy == "single" && (workers > 1 || backend == "mpi")),
                     "--strategy single runs one process with one worker; use --strategy "
                     "allreduce with --workers ", workers, " or --backend mpi");
  DTRAIN_CHECK_USAGE(std::isfinite(fusionMb) && fusionMb > 0,
                     "--fusion-mb must be a positive number (got ", fusionMb, ")");
  DTRAIN_CHECK_USAGE(accumulate >= 1, "--accumulate must be >= 1 (got ", accumulate, ")");
  try {
    comm::algorithmFromName(allreduceAlgo);
  } catch (const UsageError& e) {
    throw UsageError(std::string("--allreduce-algo: ") + e.what());
  }
}

}  // namespace dtrain::runtime
