#pragma once
// What a lossy choice (compression, asynchrony, local SGD, Hogwild!) cost in
// accuracy where docs/PERFORMANCE.md measured it, so that `dtrain plan` shows
// the price next to the speed. One entry per measured choice and setting; a
// setting that was not measured says which one was.
#include <string>

#include "runtime/TrainConfig.h"

namespace dtrain::plan {

// "" for a lossless configuration; else one short line, e.g. "measured: mlp
// -1.27 accuracy points (0.8414 vs 0.8541, 4 hosts, 3 epochs)".
std::string measuredAccuracyCost(const runtime::TrainConfig& c);

}  // namespace dtrain::plan
