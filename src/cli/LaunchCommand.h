#pragma once
// `dtrain launch`: an elastic multi-host run. Starts `dtrain train --backend mpi
// --resume auto` under mpirun on a set of hosts (emulated ones through
// scripts/netsim.sh, or real ones), and when the job fails finds the lost host,
// drops it and starts again on the rest from the newest checkpoint, keeping the
// global batch. Membership changes go to stderr and to D/launch.jsonl.
#include <CLI/CLI.hpp>

namespace dtrain::cli {

// Adds `launch`; bad usage throws dtrain::UsageError (exit 2), a job that cannot
// go on (fewer than --min-hosts left, restarts used up) dtrain::Error (exit 1).
void addLaunchCommand(CLI::App& app);

}  // namespace dtrain::cli
