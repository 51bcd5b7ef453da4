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
// integer); else, inside a SLURM job with --cpus-per-task, that count (at most
// the usable cores) shared by this process's ranks (the local backend's
// workers; an mpi rank is a task of its own); else the usable cores
// (sched_getaffinity: taskset, cpusets and SLURM's binding count) divided by
// `ranksOnMachine`, at least 1. Inside a SLURM job a count asked for that
// needs more than --cpus-per-task is a usage error.
int resolvedThreads(const TrainConfig& c, int ranksOnMachine);

// The CPUs SLURM gave each task of this job (--cpus-per-task, which sbatch and
// srun export as SLURM_CPUS_PER_TASK to every process of the job, mpirun's
// ranks included); 0 outside a job or when the job did not ask.
int slurmCpusPerTask();

// How OpenMP's idle threads wait (cli/WaitPolicy.h), for the result line:
// OMP_WAIT_POLICY's value, else "GOMP_SPINCOUNT=N", else "libgomp default".
std::string openMpWaitPolicy();

// The ranks of this mpirun job on this machine (OpenMPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS; 1 when neither is set).
int mpiRanksOnThisMachine();

}  // namespace dtrain::runtime
