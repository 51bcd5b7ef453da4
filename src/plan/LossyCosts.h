#pragma once
// What a lossy choice (compression, asynchrony, local SGD, Hogwild!) cost in
// accuracy where docs/PERFORMANCE.md measured it, so that `dtrain plan` shows
// the price next to the speed. One entry per measured choice and setting; a
// setting that was not measured says which one was.
#include <functional>
#include <string>

#include "runtime/TrainConfig.h"

namespace dtrain::plan {

// One measured lossy choice (a compressor's in LossyCosts.cpp, a strategy's in
// its StrategyCost).
struct MeasuredCost {
  // Whether it describes this configuration (null: whenever its owner is chosen).
  std::function<bool(const runtime::TrainConfig&)> applies;
  // The setting it was measured at, when the configuration's differs ("" or null: none).
  std::function<std::string(const runtime::TrainConfig&)> otherSetting;
  std::string measured;  // the figures, from the PERFORMANCE.md section named; "" not measured

  // "measured[ at SETTING]: FIGURES", or "" where it does not apply.
  std::string describe(const runtime::TrainConfig& c) const;
};

// "" for a lossless configuration; else one short line, e.g. "measured: mlp
// -1.27 accuracy points (0.8414 vs 0.8541, 4 hosts, 3 epochs)".
std::string measuredAccuracyCost(const runtime::TrainConfig& c);

}  // namespace dtrain::plan
