#pragma once
// `dtrain train`: flags -> TrainConfig -> Trainer -> one JSON line on stdout.
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// Adds the subcommand; its callback runs the training when parsed.
void addTrainCommand(CLI::App& app);

}  // namespace dtrain::cli
