#pragma once
// One attempt of a launch: `dtrain train` under mpirun on a set of hosts,
// watched until mpirun exits. Each rank runs inside a shell wrapper that records
// its exit code and time in DIR/exit.<rank> when it ends with an error (ranks
// that mpirun kills afterwards die with their wrapper and record nothing), and
// the reporting rank writes its finished step to DIR/progress and stops the job
// cleanly once DIR/stop exists (runtime/LaunchHooks.h).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/launch/Hosts.h"

namespace dtrain::cli::launch {

struct AttemptSpec {
  int index = 0;               // 0 = the first attempt (the only one the test fault hook fires in)
  std::filesystem::path dir;   // D/launch/attempt-<index>, made empty here
  std::vector<LaunchHost> hosts;
  int ranksPerHost = 1;
  std::string netsim;          // scripts/netsim.sh for emulated hosts, "" for real ones
  std::vector<std::string> trainArgs;  // without `train`
};

// What the launcher hears while an attempt runs (each polled every 20 ms).
struct AttemptWatch {
  std::function<void(int64_t step)> progressed;  // the reporter finished a new step
  std::function<bool()> shouldStop;              // true: stop the job (its stop file, once)
};

struct AttemptResult {
  int exitCode = 0;
  int64_t lastStep = -1;  // the last step the reporter finished, -1 when none
  std::string resultLine;
  bool stopAsked = false;  // the watch asked for the stop
};

// How long mpirun may take to end the job after a rank failed before the
// launcher kills it (and, on emulated hosts, everything left on them).
inline constexpr int kMpirunGraceS = 5;
// How long a job may take to stop on the stop file before mpirun gets SIGTERM.
inline constexpr int kStopGraceS = 30;

AttemptResult runAttempt(const AttemptSpec& spec, const AttemptWatch& watch);

// The rank whose wrapper recorded an error first (and its exit code), if any.
struct FailedRank {
  int rank = -1, exitCode = 0;
};
std::optional<FailedRank> firstFailedRank(const std::filesystem::path& attemptDir);
// The index in `hosts` of the host that runs `rank` (ranks are placed host by
// host, --map-by slot, `slots` each); -1 when out of range.
int hostOfRank(const std::vector<LaunchHost>& hosts, int rank);

}  // namespace dtrain::cli::launch
