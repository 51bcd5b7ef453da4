#pragma once
// The watch/restart loop of `dtrain launch`: runs attempts (Attempt.h) and,
// when one fails, finds the lost host (no answer to a probe, else the host of
// the rank that failed first), drops it and starts again on the rest from the
// newest checkpoint, keeping the global batch (TrainArgs.h).
#include <filesystem>
#include <string>
#include <vector>

#include "cli/launch/Flags.h"
#include "cli/launch/Hosts.h"
#include "cli/launch/TrainArgs.h"

namespace dtrain::cli::launch {

// Bad usage throws UsageError (exit 2) before any host is touched; a job that
// cannot go on (fewer than --min-hosts left, restarts used up) Error (exit 1);
// a signal stop::Interrupted. Prints the final result line on stdout.
void runLaunch(const LaunchFlags& flags);

// The newest periodic checkpoint's step (step-<N>.safetensors), -1 when none;
// train's --resume auto picks it (or the one before when it does not read back whole).
int64_t newestCheckpointStep(const std::filesystem::path& dir);

}  // namespace dtrain::cli::launch
