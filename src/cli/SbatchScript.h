#pragma once
// The SLURM batch script that `dtrain plan --write-sbatch FILE` writes: the
// allocation the chosen configuration needs (nodes, tasks per node, CPUs per
// task), a time limit, SIGUSR1 60 s before it, requeue; the configuration
// itself inline; and the run of examples/slurm/train.sbatch (mpirun inside the
// allocation, SIGUSR1 passed on to the ranks, one checkpoint, requeue,
// --resume auto). It runs as it is written (the slurm CTest submits one).
#include <string>

namespace dtrain::cli {

struct SbatchJob {
  int nodes = 1;
  int tasksPerNode = 1;  // ranks per node (processes under mpirun)
  int cpusPerTask = 1;
  bool mpi = true;      // false: one process whose ranks are threads (backend local)
  std::string summary;  // the plan's line for the configuration
  std::string configToml;
};

std::string sbatchScript(const SbatchJob& job);

}  // namespace dtrain::cli
