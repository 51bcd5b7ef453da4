#pragma once
// `dtrain bench ps`: how many updates per second S parameter servers absorb.
// W workers (no model compute: their gradients are constant) push a whole
// model's gradient and fetch the parameters back every step, asynchronously,
// for a fixed time; the servers apply each push with the optimizer. With more
// servers each push is split into S smaller shards applied in parallel, so the
// updates/s of the group grows with S until the workers or the transport limit it.
#include <nlohmann/json.hpp>
#include <string>

namespace dtrain::parallel::ps {

struct ServerBenchConfig {
  int servers = 1;
  int workers = 4;
  std::string model = "mlp";
  double seconds = 3;
};

// Runs S+W ranks as threads (local backend). Returns {"servers", "workers",
// "model", "parameters", "updates_per_s", "pushes", "seconds", "bytes_per_s",
// "updates_per_server"}.
nlohmann::json runServerBench(const ServerBenchConfig& config);

}  // namespace dtrain::parallel::ps
