#pragma once
// What one parameter server measured over a run; sent to worker 0 at the end
// (as JSON) and merged there into the run's report.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/Memory.h"

namespace dtrain::parallel::ps {

// Staleness histogram buckets: [k] counts gradients applied k versions after the
// parameters they were computed on; the last bucket counts kStalenessBuckets-1 or more.
inline constexpr size_t kStalenessBuckets = 33;

struct ServerStats {
  int server = 0;
  int64_t updates = 0;   // optimizer steps applied to this shard
  int64_t pushes = 0;    // gradient messages received
  int64_t dropped = 0;   // late gradients dropped (sync with backup workers)
  int64_t bytesIn = 0, bytesOut = 0;
  double seconds = 0;    // from the first worker message to the last
  std::vector<int64_t> staleness = std::vector<int64_t>(kStalenessBuckets, 0);
  // sync: gradients applied and dropped per step, from the first step this run collected
  std::vector<int64_t> appliedPerStep, droppedPerStep;
  int64_t sspMaxAhead = 0;  // ssp: most steps a push ran ahead of the slowest worker
  std::vector<int> deadWorkers;        // every worker declared dead at some point
  std::vector<int> readmittedWorkers;  // one entry per re-admission
  std::vector<double> workerWaitS;  // per worker, from its Done message (-1: none)
  // memory_per_rank: this server's accounting domain at the end of the run, and
  // each worker's from its Done message (all zero: none arrived).
  memory::RankMemory memory;
  std::vector<memory::RankMemory> workerMemory;

  void recordStaleness(int64_t versions);
  nlohmann::json toJson() const;
  // Throws (nlohmann's errors, dtrain::Error) on a missing field, a wrong type, or
  // lists whose sizes do not fit a run of `workers` workers.
  static ServerStats fromJson(const nlohmann::json& j, int workers);
};

}  // namespace dtrain::parallel::ps
