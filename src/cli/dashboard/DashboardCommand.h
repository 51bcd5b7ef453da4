#pragma once
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// `dtrain dashboard [RUN_DIR ...] [--port P] [--host H]`: a local web page that
// follows runs as they write (src/cli/dashboard/).
void addDashboardCommand(CLI::App& app);

}  // namespace dtrain::cli
