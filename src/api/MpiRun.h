#pragma once
// One process's rank of an `mpirun` job, however it trains (the trainer's
// ranks, fedavg's server and client hosts): the communicator, MPI finalized at
// the end, and on an error the whole job aborted at once (the other ranks
// would otherwise wait for their timeouts) before the error goes on.
#include <functional>

#include <nlohmann/json.hpp>

#include "comm/Communicator.h"

namespace dtrain::api {

// How long ranks wait for each other (0: the communicators' defaults).
struct CommLimits {
  comm::Millis call{0};  // --call-timeout: one call, every peer alive
  comm::Millis peer{0};  // --comm-timeout: a peer without heartbeats (mpi)
};

// Checks that MPI is built in and that mpirun started this process, runs
// `rank` on the world communicator and returns its result line (null on the
// ranks that do not report).
nlohmann::json runMpiProcess(const std::function<nlohmann::json(comm::Communicator&)>& rank,
                             CommLimits limits = {});
// Seconds as the communicators take them (0: their default).
comm::Millis commTimeout(double seconds);
CommLimits commLimits(double callTimeoutS, double peerTimeoutS);

}  // namespace dtrain::api
