#pragma once
// The last line of `dtrain train`: one JSON object with the result, the fields
// of the option groups the run used (their schema's result keys) and the whole
// effective configuration under "config", the same under every strategy.
#include <nlohmann/json.hpp>

#include "api/RunConfig.h"

namespace dtrain::api {

// Adds the configuration's result fields, the strategy, backend and workers,
// and "config" to `out` (a TrainResult's or the federated runner's JSON).
void addRunFields(nlohmann::json& out, const RunConfig& rc, int workers,
                  const std::string& backend);

}  // namespace dtrain::api
