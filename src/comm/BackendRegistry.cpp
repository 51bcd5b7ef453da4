#include "comm/BackendRegistry.h"

#include <cstdlib>

#include "comm/local/LocalCommunicator.h"
#include "core/Error.h"
#include "core/NameRegistry.h"

#if DTRAIN_WITH_MPI
#include "comm/mpi/MpiBackend.h"
#endif

namespace dtrain::comm {

namespace {

std::unique_ptr<Communicator> makeLocal(const BackendConfig& cfg) {
  std::shared_ptr<local::World> world =
      cfg.group ? std::static_pointer_cast<local::World>(cfg.group)
                : std::make_shared<local::World>(1);
  DTRAIN_CHECK_USAGE(cfg.rank >= 0 && cfg.rank < world->size(), "local backend: rank ", cfg.rank,
                     " out of range for a group of ", world->size());
  return std::make_unique<local::LocalCommunicator>(
      world, cfg.rank, cfg.timeout.count() > 0 ? cfg.timeout : defaultTimeout());
}

// The backends built in (fixed at build time: mpi with DTRAIN_WITH_MPI).
const NameRegistry<BackendFactory>& registry() {
  static const NameRegistry<BackendFactory> r("communication backend", {
      {"local", makeLocal},
#if DTRAIN_WITH_MPI
      {"mpi", mpi::makeMpiCommunicator},
#endif
  });
  return r;
}

}  // namespace

std::vector<std::string> backendNames() { return registry().names(); }

bool hasBackend(const std::string& name) { return registry().contains(name); }

void requireBackend(const std::string& name) {
  DTRAIN_CHECK_USAGE(name != "mpi" || hasBackend(name),
                     "communication backend mpi: this build has no MPI support");
  registry().find(name);
}

std::unique_ptr<Communicator> makeCommunicator(const std::string& name, const BackendConfig& config) {
  requireBackend(name);
  return registry().find(name)(config);
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

Millis defaultPeerTimeout() { return Millis{30000}; }

}  // namespace dtrain::comm
