#include "parallel/ps/ServerStats.h"

#include <algorithm>

#include "core/Error.h"

namespace dtrain::parallel::ps {
namespace {
std::vector<std::array<int64_t, memory::RankMemory::kFields>> memoryArrays(
    const std::vector<memory::RankMemory>& ms) {
  std::vector<std::array<int64_t, memory::RankMemory::kFields>> out;
  for (const memory::RankMemory& m : ms) out.push_back(m.toArray());
  return out;
}

// Every number in v (an array, at any depth) is an integer.
void requireIntegers(const nlohmann::json& v, const char* key) {
  if (v.is_array()) {
    for (const nlohmann::json& e : v) requireIntegers(e, key);
    return;
  }
  DTRAIN_CHECK(v.is_number_integer(), "server statistics: '", key, "' holds ", v.type_name(),
               " where an integer belongs");
}
}  // namespace

void ServerStats::recordStaleness(int64_t versions) {
  const auto k = static_cast<size_t>(std::clamp<int64_t>(versions, 0, kStalenessBuckets - 1));
  ++staleness[k];
}

nlohmann::json ServerStats::toJson() const {
  return {{"server", server},
          {"updates", updates},
          {"pushes", pushes},
          {"dropped", dropped},
          {"bytes_in", bytesIn},
          {"bytes_out", bytesOut},
          {"seconds", seconds},
          {"staleness", staleness},
          {"applied_per_step", appliedPerStep},
          {"dropped_per_step", droppedPerStep},
          {"ssp_max_ahead", sspMaxAhead},
          {"dead_workers", deadWorkers},
          {"readmitted_workers", readmittedWorkers},
          {"worker_wait_s", workerWaitS},
          {"memory", memory.toArray()},
          {"worker_memory", memoryArrays(workerMemory)}};
}

ServerStats ServerStats::fromJson(const nlohmann::json& j, int workers) {
  // Integers must arrive as JSON integers: nlohmann converts a float outside an
  // integer's range with undefined behaviour (found by tests/fuzz: FuzzServerStats).
  for (const char* key : {"server", "updates", "pushes", "dropped", "bytes_in", "bytes_out",
                          "staleness", "applied_per_step", "dropped_per_step", "ssp_max_ahead",
                          "dead_workers", "readmitted_workers", "memory", "worker_memory"})
    requireIntegers(j.at(key), key);
  ServerStats s;
  s.server = j.at("server");
  s.updates = j.at("updates");
  s.pushes = j.at("pushes");
  s.dropped = j.at("dropped");
  s.bytesIn = j.at("bytes_in");
  s.bytesOut = j.at("bytes_out");
  s.seconds = j.at("seconds");
  s.staleness = j.at("staleness").get<std::vector<int64_t>>();
  s.appliedPerStep = j.at("applied_per_step").get<std::vector<int64_t>>();
  s.droppedPerStep = j.at("dropped_per_step").get<std::vector<int64_t>>();
  s.sspMaxAhead = j.at("ssp_max_ahead");
  s.deadWorkers = j.at("dead_workers").get<std::vector<int>>();
  s.readmittedWorkers = j.at("readmitted_workers").get<std::vector<int>>();
  s.workerWaitS = j.at("worker_wait_s").get<std::vector<double>>();
  using Fields = std::array<int64_t, memory::RankMemory::kFields>;
  s.memory = memory::RankMemory::fromArray(j.at("memory").get<Fields>());
  for (const Fields& a : j.at("worker_memory").get<std::vector<Fields>>())
    s.workerMemory.push_back(memory::RankMemory::fromArray(a));
  const auto w = static_cast<size_t>(workers);
  DTRAIN_CHECK(s.staleness.size() == kStalenessBuckets && s.workerWaitS.size() == w &&
                   s.workerMemory.size() == w,
               "server statistics: ", s.staleness.size(), " staleness buckets, ",
               s.workerWaitS.size(), " worker waits and ", s.workerMemory.size(),
               " worker memory records for ", workers, " workers");
  return s;
}

}  // namespace dtrain::parallel::ps
