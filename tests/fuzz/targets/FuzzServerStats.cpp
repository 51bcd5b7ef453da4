// The statistics JSON a parameter server sends worker 0 at the end of a run
// (parallel/ps/ServerStats.h): any JSON, any sizes of its lists, for a run of
// 3 workers.
#include <nlohmann/json.hpp>

#include "fuzz/FuzzInput.h"
#include "parallel/ps/ServerStats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain::parallel::ps;
  dtrain::fuzz::expectErrorsOnly([&] {
    const ServerStats s = ServerStats::fromJson(nlohmann::json::parse(data, data + size), 3);
    // What the worker reads of it: one memory record and one wait per worker.
    volatile double sink = s.workerWaitS[2] + static_cast<double>(s.workerMemory[2].toArray()[0]);
    (void)sink;
  });
  return 0;
}
