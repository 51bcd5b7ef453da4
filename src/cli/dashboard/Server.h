#pragma once
// The dashboard's HTTP server: the embedded page (Assets.h) and the JSON it polls.
//   GET /api/runs                       [{name, path, finished, has_timeline, ...}]
//   GET /api/run/NAME/metrics?since=N   {records: [...], next: N', bad_lines}
//   GET /api/run/NAME/result            the result line, or null while running
//   GET /api/run/NAME/config            config.toml as text (404 without one)
//   GET /api/run/NAME/timeline.json     the Perfetto/Chrome trace (404 without one)
//   GET /api/run/NAME/machine.json      the machine file (404 without one)
#include <string>
#include <vector>

namespace dtrain::cli::dashboard {

struct ServerOptions {
  std::vector<std::string> sources;  // run directories, directories of runs, metrics files
  std::string host = "127.0.0.1";
  int port = 8050;                   // 0: any free port
};

// Binds (a UsageError naming host and port if it cannot), prints the page's URL
// on stdout, and serves until the process is stopped.
void serve(const ServerOptions& options);

}  // namespace dtrain::cli::dashboard
