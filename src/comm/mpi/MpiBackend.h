#pragma once
// The `mpi` backend's entry points. No MPI types: the public API stays MPI-free.
#include <memory>
#include <string>

#include "comm/Registry.h"

namespace dtrain::comm::mpi {

// The communicator of all ranks started by mpirun (MPI_COMM_WORLD). Initializes
// MPI with MPI_THREAD_MULTIPLE on first use (async collectives run on a progress
// thread while the caller keeps sending).
std::unique_ptr<Communicator> makeMpiCommunicator(const BackendConfig& config);

// Ends MPI if this process started it. With exitCode != 0 and more than one rank,
// prints `message` (when not empty) on stderr, flushes, and aborts the whole job
// (MPI_Abort) instead of waiting in MPI_Finalize for ranks that will never come.
void finalize(int exitCode, const std::string& message);

}  // namespace dtrain::comm::mpi
