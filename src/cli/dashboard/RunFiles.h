#pragma once
// What `dtrain dashboard` reads: runs (a --run-dir, a directory of them, or a bare
// --metrics file) and their files, read afresh on every request so the page follows
// runs as they write. A file may be missing (a run just started, or one that wrote
// no timeline) or end in a half-written line (the writer is mid-record): neither is
// an error, the page shows what is complete.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain::cli::dashboard {

struct Run {
  std::string name;     // unique among the runs shown (the directory's name, numbered if twice)
  std::string dir;      // empty for a bare metrics file
  std::string metrics;  // the JSON Lines file
  std::string file(const std::string& leaf) const { return dir.empty() ? "" : dir + "/" + leaf; }
};

// Throws UsageError naming a path that does not exist.
void checkSources(const std::vector<std::string>& sources);
// The runs under `sources` now: a directory with metrics.jsonl or config.toml is a
// run, another directory holds runs (its subdirectories, one level), a file is a
// metrics file.
std::vector<Run> findRuns(const std::vector<std::string>& sources);

struct MetricsChunk {
  nlohmann::json records = nlohmann::json::array();
  uint64_t next = 0;  // the offset after the last complete line: the next call's `since`
  int64_t badLines = 0;  // complete lines that are no JSON object (skipped)
};
// The complete lines of `path` from byte `since` on (at most `maxBytes` of them).
MetricsChunk readMetrics(const std::string& path, uint64_t since, uint64_t maxBytes = 4u << 20);

// The whole file, or nothing when it is missing.
std::optional<std::string> readFile(const std::string& path);

// /api/runs's entry of `run`: its name, what it has, whether it finished.
nlohmann::json describeRun(const Run& run);

}  // namespace dtrain::cli::dashboard
