#pragma once
// One process's rank of an `mpirun` job, however it trains (the trainer's
// ranks, fedavg's server and client hosts): the communicator, MPI finalized at
// the end, and on an error the whole job aborted at once (the other ranks
// would otherwise wait for their timeouts) before the error goes on.
#include <functional>

#include <nlohmann/json.hpp>

#include "comm/Communicator.h"

namespace dtrain::api {

// Checks that MPI is built in and that mpirun started this process, runs
// `rank` on the world communicator and returns its result line (null on the
// ranks that do not report). `timeout`: each communication call's limit
// (--comm-timeout; 0 = comm::defaultTimeout()).
nlohmann::json runMpiProcess(const std::function<nlohmann::json(comm::Communicator&)>& rank,
                             comm::Millis timeout = comm::Millis{0});
// --comm-timeout as the communicators take it (0: their default).
comm::Millis commTimeout(double seconds);

}  // namespace dtrain::api
