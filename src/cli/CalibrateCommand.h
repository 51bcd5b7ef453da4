#pragma once
// `dtrain calibrate`: measures this machine into a machine file for
// `dtrain simulate` and `dtrain plan` (the measurements live in src/calibrate).
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// Adds `calibrate`; its callback runs the measurements and writes --out.
// Bad flags throw dtrain::UsageError (exit 2); failures while measuring throw
// dtrain::Error (exit 1).
void addCalibrateCommand(CLI::App& app);

}  // namespace dtrain::cli
