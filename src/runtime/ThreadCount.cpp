#include "runtime/ThreadCount.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/Error.h"

namespace dtrain::runtime {

namespace {

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// A whole number in [1, 1024], or 0 when `s` is not one.
int positiveCount(const char* s) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return end && *end == '\0' && v > 0 && v <= 1024 ? static_cast<int>(v) : 0;
}

// A thread count asked for (--threads N, OMP_NUM_THREADS) must fit the task:
// more threads than its CPUs would share them with the job's other tasks.
// `ranksHere`: the ranks of this process that each run that many.
void checkFitsSlurmTask(int threads, const char* what, int ranksHere, int slurmCpus) {
  DTRAIN_CHECK_USAGE(slurmCpus == 0 || threads * ranksHere <= slurmCpus, what, " ", threads,
                     ranksHere > 1 ? " x " + std::to_string(ranksHere) + " workers" : std::string(),
                     ": this SLURM task was given ", slurmCpus, " CPU", slurmCpus == 1 ? "" : "s",
                     " (SLURM_CPUS_PER_TASK); ask for more with --cpus-per-task or use --threads auto");
}

}  // namespace

int slurmCpusPerTask() {
  if (!std::getenv("SLURM_JOB_ID")) return 0;
  const char* s = std::getenv("SLURM_CPUS_PER_TASK");
  return s && *s ? positiveCount(s) : 0;
}

int resolvedThreads(const TrainConfig& c, int ranksOnMachine) {
  const int slurmCpus = slurmCpusPerTask();
  // The ranks that share this process's CPUs: the local backend's threads; an
  // mpi rank is a process (under SLURM, a task) of its own.
  const int ranksHere = c.backend == "mpi" ? 1 : std::max(1, ranksOnMachine);
  if (c.threads > 0) {
    checkFitsSlurmTask(c.threads, "--threads", ranksHere, slurmCpus);
    return c.threads;
  }
  if (const char* s = std::getenv("OMP_NUM_THREADS"); s && *s) {
    const int v = positiveCount(s);
    DTRAIN_CHECK_USAGE(v > 0, "--threads auto: OMP_NUM_THREADS must be a whole number from 1 to 1024 (got '", s,
                       "')");
    checkFitsSlurmTask(v, "OMP_NUM_THREADS", ranksHere, slurmCpus);
    return v;
  }
  // Under SLURM the task's CPUs are known (whatever the affinity mask: mpirun
  // inside a job may leave every rank the node's whole allocation), never more
  // than the mask allows, shared by the ranks of this process.
  if (slurmCpus > 0) return std::max(1, std::min(slurmCpus, usableCores()) / ranksHere);
  return std::max(1, usableCores() / std::max(1, ranksOnMachine));
}

std::string openMpWaitPolicy() {
  if (const char* p = std::getenv("OMP_WAIT_POLICY"); p && *p) return p;
  if (const char* s = std::getenv("GOMP_SPINCOUNT"); s && *s) return std::string("GOMP_SPINCOUNT=") + s;
  return "libgomp default";
}

int mpiRanksOnThisMachine() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* s = std::getenv(name); s && *s)
      if (const int v = positiveCount(s)) return v;
  return 1;
}

}  // namespace dtrain::runtime
