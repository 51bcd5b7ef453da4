#pragma once
// A prediction as the trainer's outputs: the result line's JSON and a Chrome
// trace (--timeline) with the measured timeline's names (forward, backward,
// F<i>/B<i> of a pipeline, allreduce, optimizer), so the two lie side by side.
#include <string>

#include "plan/Simulator.h"

namespace dtrain::plan {

// Writes FILE atomically; throws naming it.
void writePredictedTimeline(const std::string& path, const Prediction& p);

}  // namespace dtrain::plan
