#pragma once
// `dtrain train --strategy fedavg` (docs/guide/federated.md): the federated
// runner instead of the trainer, simulated in this process or over MPI.
#include <nlohmann/json.hpp>

#include "api/RunConfig.h"
#include "runtime/Task.h"

namespace dtrain::api {

// Runs the federated training of a prepared configuration (on `data` when
// given) and returns the result line (null on the ranks that do not report).
nlohmann::json runFederated(const RunConfig& rc, runtime::TaskData data = {});

}  // namespace dtrain::api
