#pragma once
// The record of a launch: every event (start, failure, restart, done, stopped)
// is one JSON line in D/launch.jsonl with its wall-clock time, and the tally
// the final result line reports (restarts, hosts lost, steps redone, time to
// recover, hosts rejoined).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace dtrain::cli::launch {

struct LaunchTally {
  int restarts = 0, hostsLost = 0;
  int failures = 0;       // restarts after a failure (--max-restarts counts these)
  int hostsRejoined = 0;  // --rejoin: dropped hosts taken back
  int64_t stepsRedone = 0;
  double secondsToRecover = 0;  // summed over the failures: mpirun's exit -> first new step
};

class MembershipLog {
 public:
  // Appends to dir/launch.jsonl (UsageError when it cannot be written).
  explicit MembershipLog(const std::filesystem::path& dir);
  // One record, with "time" (seconds since the epoch) added.
  void record(nlohmann::json record);

  LaunchTally& tally() { return tally_; }
  // A failure: the clock of the recovery starts.
  void failed() { failedAt_ = std::chrono::steady_clock::now(); }
  // Between a failure and the first step trained after it.
  bool recovering() const { return failedAt_.has_value(); }
  // The attempt that followed a failure finished `step`, past the one it
  // resumed from: training again.
  void progressed(int64_t step, int64_t resumeStep);
  // The last attempt's result line plus the tally.
  nlohmann::json finalResult(const std::string& resultLine) const;

 private:
  std::ofstream out_;
  LaunchTally tally_;
  std::optional<std::chrono::steady_clock::time_point> failedAt_;
};

}  // namespace dtrain::cli::launch
