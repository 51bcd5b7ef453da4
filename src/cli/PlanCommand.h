#pragma once
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// `dtrain plan --model M --global-batch B --hosts H --ranks-per-host R --machine machine.json`:
// the fastest configurations predicted for the machine, best first.
void addPlanCommand(CLI::App& app);

}  // namespace dtrain::cli
