#include "comm/Registry.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "comm/local/LocalCommunicator.h"
#include "core/Error.h"

#if DTRAIN_WITH_MPI
#include "comm/mpi/MpiBackend.h"
#endif

namespace dtrain::comm {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendFactory> factories;
};

std::unique_ptr<Communicator> makeLocal(const BackendConfig& cfg) {
  std::shared_ptr<local::World> world =
      cfg.group ? std::static_pointer_cast<local::World>(cfg.group)
                : std::make_shared<local::World>(1);
  DTRAIN_CHECK_USAGE(cfg.rank >= 0 && cfg.rank < world->size(), "local backend: rank ", cfg.rank,
                     " out of range for a group of ", world->size());
  return std::make_unique<local::LocalCommunicator>(
      world, cfg.rank, cfg.timeout.count() > 0 ? cfg.timeout : defaultTimeout());
}

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->factories["local"] = makeLocal;
#if DTRAIN_WITH_MPI
    reg->factories["mpi"] = mpi::makeMpiCommunicator;
#endif
    return reg;
  }();
  return *r;
}

}  // namespace

void registerBackend(const std::string& name, BackendFactory factory) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[name] = std::move(factory);
}

std::vector<std::string> backendNames() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (auto& [k, v] : r.factories) names.push_back(k);
  return names;
}

bool hasBackend(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.factories.count(name) > 0;
}

std::unique_ptr<Communicator> makeCommunicator(const std::string& name, const BackendConfig& config) {
  BackendFactory f;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      std::string known;
      for (auto& [k, v] : r.factories) known += (known.empty() ? "" : ", ") + k;
      throw UsageError("unknown communication backend '" + name + "' (available: " + known + ")" +
                       (name == "mpi" ? "; this build has no MPI support" : ""));
    }
    f = it->second;
  }
  return f(config);
}

void shutdown(int exitCode, const std::string& message) {
#if DTRAIN_WITH_MPI
  mpi::finalize(exitCode, message);
#else
  (void)exitCode;
  (void)message;
#endif
}

Millis defaultTimeout() {
  if (const char* s = std::getenv("DTRAIN_COMM_TIMEOUT_MS")) {
    char* end = nullptr;
    long long v = std::strtoll(s, &end, 10);
    DTRAIN_CHECK_USAGE(end && *end == '\0' && v > 0, "DTRAIN_COMM_TIMEOUT_MS must be a positive "
                       "number of milliseconds (got '", s, "')");
    return Millis{v};
  }
  return Millis{300000};
}

}  // namespace dtrain::comm
