#pragma once
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// `dtrain simulate --config run.toml --machine machine.json [--timeline out.json]`:
// the predicted step of the configuration on the machine, as one JSON line.
void addSimulateCommand(CLI::App& app);

}  // namespace dtrain::cli
