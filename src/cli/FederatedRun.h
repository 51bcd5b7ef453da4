#pragma once
// `dtrain train --strategy fedavg` (docs/guide/federated.md): the federated
// runner instead of the trainer, simulated in this process or over MPI.
#include "api/RunConfig.h"

namespace dtrain::cli {

// Runs the federated training of a prepared configuration and prints the final JSON line.
void runFederated(const api::RunConfig& rc);

}  // namespace dtrain::cli
