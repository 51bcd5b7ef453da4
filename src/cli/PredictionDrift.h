#pragma once
// --machine: what a run measured per phase against what the simulator predicted
// for its configuration (issue 58, "predicted against measured"). A phase whose
// measured time per step is more than 25% off the prediction is named once on
// stderr, with the question it raises, and listed in the result line's "drift".
#include <nlohmann/json.hpp>

#include "plan/Simulator.h"

namespace dtrain::cli {

inline constexpr double kDriftShare = 0.25;

// Adds "predicted_phases" ({phase: {"measured_ms", "predicted_ms", "ratio"}}, for
// the phases the result measures) and "drift" (the phases off by more than 25%,
// largest first; [] when none) to `result`, and prints one line per drifting
// phase on stderr.
void compareWithPrediction(nlohmann::json& result, const plan::Prediction& predicted);

}  // namespace dtrain::cli
