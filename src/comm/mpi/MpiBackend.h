#pragma once
// The `mpi` backend's entry points. No MPI types: the public API stays MPI-free.
#include <memory>
#include <string>

#include "comm/BackendRegistry.h"

namespace dtrain::comm::mpi {

// The communicator of all ranks started by mpirun (MPI_COMM_WORLD). Initializes
// MPI with MPI_THREAD_MULTIPLE on first use (async collectives run on a progress
// thread while the caller keeps sending).
std::unique_ptr<Communicator> makeMpiCommunicator(const BackendConfig& config);

// Ranks of the run on this machine's kernel (its boot id), counted when the
// world communicator is made: emulated hosts and containers of one machine
// are one machine here, where MPI calls each a node. Ranks that outnumber the
// cores wait without spinning and nap sooner. 0 before the world is made, or
// where the kernel has no boot id.
int ranksOnThisMachine();

// Ends MPI if this process started it. With exitCode != 0 and more than one rank,
// prints `message` (when not empty) on stderr, flushes, and aborts the whole job
// (MPI_Abort) instead of waiting in MPI_Finalize for ranks that will never come.
void finalize(int exitCode, const std::string& message);

}  // namespace dtrain::comm::mpi
