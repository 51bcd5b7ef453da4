#pragma once
// --threads auto (the default): the intra-op threads of each rank follow the
// cores its process's machine has, shared among the ranks that run there (as
// PyTorch's default follows the cores and OMP_NUM_THREADS). So one process on a
// 2-core machine computes with 2 threads, and 2 workers (threads or mpi ranks
// of one machine) with 1 each instead of oversubscribing the cores.
#include <string>

#include "runtime/TrainConfig.h"

namespace dtrain::runtime {

// c.threads when given (> 0); else OMP_NUM_THREADS when set (a positive
// integer), else the usable cores (sched_getaffinity: taskset and cpusets
// count) divided by `ranksOnMachine`, at least 1.
int resolvedThreads(const TrainConfig& c, int ranksOnMachine);

// How OpenMP's idle threads wait (cli/WaitPolicy.h), for the result line:
// OMP_WAIT_POLICY's value, else "GOMP_SPINCOUNT=N", else "libgomp default".
std::string openMpWaitPolicy();

// The ranks of this mpirun job on this machine (OpenMPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS; 1 when neither is set).
int mpiRanksOnThisMachine();

}  // namespace dtrain::runtime
