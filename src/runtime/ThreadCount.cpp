#include "runtime/ThreadCount.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
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

}  // namespace

int resolvedThreads(const TrainConfig& c, int ranksOnMachine) {
  if (c.threads > 0) return c.threads;
  if (const char* s = std::getenv("OMP_NUM_THREADS"); s && *s) {
    const int v = positiveCount(s);
    DTRAIN_CHECK_USAGE(v > 0, "--threads auto: OMP_NUM_THREADS must be a whole number from 1 to 1024 (got '", s,
                       "')");
    return v;
  }
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
