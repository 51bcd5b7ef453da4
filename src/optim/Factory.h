#pragma once
// Builds an optimizer by name from options a user gave (flags or config).
// Unset options take the torch defaults of the chosen optimizer.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optim/Optimizer.h"

namespace dtrain::optim {

struct OptimizerOptions {
  std::optional<double> lr{};
  // sgd
  std::optional<double> momentum{};
  std::optional<double> dampening{};
  std::optional<bool> nesterov{};
  // all
  std::optional<double> weightDecay{};
  // Weight decay only for parameters with >= 2 dims (Optimizer::setDecay2dOnly).
  std::optional<bool> decay2dOnly{};
  // adam, adamw, lamb
  std::optional<double> beta1{};
  std::optional<double> beta2{};
  // adam, adamw, adagrad
  std::optional<double> eps{};
  // adagrad
  std::optional<double> lrDecay{};
  std::optional<double> initialAccumulatorValue{};
  // lbfgs: curvature pairs kept (--lbfgs-history)
  std::optional<int> lbfgsHistory{};
  // --offload optimizer: the state lives in a file in this directory (empty: in memory).
  std::string offloadDir{};
};

// "sgd", "adam", "adamw", "adagrad", "lars", "lamb".
const std::vector<std::string>& optimizerNames();

// Whether the optimizer's update of a parameter needs the norms of the whole
// tensor (LARS's and LAMB's trust ratios): strategies that update slices of a
// parameter (ZeRO's flat shards, parameter servers' shards, tensor-parallel
// cuts) refuse them.
inline bool needsWholeLayerNorms(const std::string& name) { return name == "lars" || name == "lamb"; }

// Throws dtrain::UsageError naming the flag on an unknown optimizer, an invalid
// value, or an option that the optimizer does not have (e.g. --momentum for adam).
std::unique_ptr<Optimizer> makeOptimizer(const std::string& name, NamedParameters params,
                                         const OptimizerOptions& options = {});

}  // namespace dtrain::optim
