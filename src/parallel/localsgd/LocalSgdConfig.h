#pragma once
// --strategy local-sgd's options as the run configuration holds them ([localsgd]
// in config files; TrainConfig::strategyOptions.get<LocalSgdConfig>()). The spec
// (LocalSgdSpec.cpp) turns them into the strategy's LocalSgdOptions.
#include <cstdint>
#include <string>

namespace dtrain::parallel::localsgd {

struct LocalSgdConfig {
  int64_t syncEvery = 4;              // H: inner steps between parameter averages
  int64_t startStep = 0;              // S: synchronous allreduce steps first (post-local SGD)
  std::string outerOptimizer = "sgd"; // sgd or nesterov, on the averaged delta
  double outerLr = 1.0;               // sgd 1, no momentum: plain averaging
  double outerMomentum = 0.0;
};

}  // namespace dtrain::parallel::localsgd
