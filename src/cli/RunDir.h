#pragma once
// dtrain train --run-dir D: one directory per run that a dashboard (or a person)
// reads while the run goes and after it:
//   config.toml    the resolved configuration (what --print-config prints)
//   metrics.jsonl  the --metrics records, one a line, flushed per record
//   result.json    the final JSON line (absent while the run goes, or if it failed)
//   timeline.json  the --timeline trace, with --run-timeline
//   machine.json   a copy of the --machine file, when one is given
// The outputs that go into D are its own: an explicit --metrics or --timeline path
// beside --run-dir is refused (one place for each file, so a dashboard finds it).
// Under mpirun only the first process writes the shared files.
#include <string>

#include <nlohmann/json.hpp>

namespace dtrain::api {
struct RunConfig;
}

namespace dtrain::cli {

struct RunDirRequest {
  std::string dir;           // --run-dir; empty: off
  bool timeline = false;     // --run-timeline
};

class RunDir {
 public:
  // Checks `request` against `rc` (usage errors name both flags), creates the
  // directory and points rc's metrics (and timeline) into it.
  RunDir(const RunDirRequest& request, api::RunConfig& rc);
  bool enabled() const { return !dir_.empty(); }
  // config.toml and machine.json: before training, so a dashboard sees the run at once.
  void writeStart(const std::string& configToml, const std::string& machineFile) const;
  // result.json: the reporter's final line.
  void writeResult(const nlohmann::json& result) const;

 private:
  std::string dir_;
  bool writesSharedFiles_ = true;
};

// False in every mpirun process but the first: it alone writes a run's shared files.
bool firstProcessOfJob();

}  // namespace dtrain::cli
