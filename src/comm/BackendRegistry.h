#pragma once
// The backends by name, coexisting in one binary: makeCommunicator("local") or
// makeCommunicator("mpi") (built with DTRAIN_WITH_MPI).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/Communicator.h"

namespace dtrain::comm {

struct BackendConfig {
  // local: this rank and the group size; `group` from local::makeGroup(size),
  // shared by the group's ranks (null: a new single-rank group). mpi ignores them
  // (rank and size come from mpirun).
  int rank = 0;
  int size = 1;
  std::shared_ptr<void> group{};
  Millis timeout{0};      // the longest one call waits (--call-timeout); 0 = defaultTimeout()
  Millis peerTimeout{0};  // mpi: a peer silent this long fails waits on it (--comm-timeout,
                          // comm/mpi/Liveness.h); 0 = defaultPeerTimeout()
};

using BackendFactory = std::function<std::unique_ptr<Communicator>(const BackendConfig&)>;

// Throws UsageError naming the available backends when `name` is unknown.
std::unique_ptr<Communicator> makeCommunicator(const std::string& name,
                                               const BackendConfig& config = {});
std::vector<std::string> backendNames();
bool hasBackend(const std::string& name);
// Throws UsageError naming the known backends (or saying MPI is not built in).
void requireBackend(const std::string& name);

// The per-call limit: DTRAIN_COMM_TIMEOUT_MS when set, else 300 s: generous (a
// peer may be alive but busy: evaluating, checkpointing, loading data) but finite.
Millis defaultTimeout();
// How long a peer may send no heartbeat before waits on it fail: 30 s (beats
// come every second from a thread of their own, so a busy peer still beats).
Millis defaultPeerTimeout();

// Call once at the end of main with the exit code. Ends the backends' global
// state: with mpi, exitCode 0 finalizes MPI; a failure prints `message` (if any)
// with the rank on stderr and aborts the whole job, so that the other ranks stop
// at once instead of waiting for their timeouts. No-op without MPI.
void shutdown(int exitCode, const std::string& message = {});

}  // namespace dtrain::comm
