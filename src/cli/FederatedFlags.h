#pragma once
// The flags of `dtrain train --strategy fedavg` (README "Federated learning") and the
// dispatch to the federated runner, kept out of TrainCommand.cpp's shared code.
#include <functional>
#include <memory>

#include <CLI/CLI.hpp>

#include "federated/FederatedOptions.h"
#include "runtime/TrainConfig.h"

namespace dtrain::cli {

// Registers the federated flags on `train`; the options fill as CLI11 parses.
std::shared_ptr<federated::FederatedOptions> addFederatedFlags(CLI::App* train);

// Rejects federated flags without --strategy fedavg; with it, runs the federated
// training and prints the final JSON line. Returns whether it ran.
bool runFederatedIfChosen(const runtime::TrainConfig& config,
                          const federated::FederatedOptions& options,
                          const std::function<bool(const char* flag)>& given);

}  // namespace dtrain::cli
