#pragma once
// `dtrain bench allreduce`: time allreduce per message size and report
// algbw = bytes/time and busbw = algbw * 2(n-1)/n (the nccl-tests convention),
// checking every result. Shared by the CLI and the dtrain_comm_bench binary.
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "comm/CollectiveTypes.h"

namespace dtrain::comm {

struct AllreduceBenchConfig {
  std::string backend = "local";
  int workers = 2;                  // local: ranks (threads); mpi: must match mpirun -np (0 = any)
  std::vector<Algorithm> algos{Algorithm::Auto};
  size_t minBytes = 4096;
  size_t maxBytes = 64u << 20;
  int stepFactor = 4;               // sizes: min, min*f, min*f^2, ... <= max
  int iters = 0;                    // allreduces per timed run; 0 = by size (5..200)
  int runs = 5;                     // timed runs per size; the median is reported
  double idleMs = 0;                // > 0: each call after this long with the links idle
  // > 0: each call after this much compute, in CPU time of the calling thread
  // (a tensor-parallel sum after a layer: where ranks outnumber the cores the
  // partner may still wait for one, and the call waits with it)
  double busyMs = 0;
  bool json = false;
  bool callChecks = true;           // mpi: compare call descriptors (always on for local)
};

struct AllreduceBenchRow {
  std::string algo;     // as requested
  std::string resolved; // what auto chose
  size_t bytes = 0;
  double micros = 0;    // median time of one allreduce (slowest rank)
  double algbw = 0;     // GB/s
  double busbw = 0;     // GB/s
  uint64_t sentBytes = 0;  // measured per allreduce, the most any rank sent (checks included)
  bool ok = false;      // result matched the closed form
};

// Throws UsageError for a bad configuration (unknown backend or algorithm,
// workers < 1, min > max, sizes not multiples of 4 bytes, ...).
void validate(const AllreduceBenchConfig& config);

// Parses "ring,shm" into algorithms (UsageError on unknown names).
std::vector<Algorithm> parseAlgorithms(const std::string& list);

// Runs the benchmark; rank 0 prints the table (or one JSON object) on `out`.
// Returns the rows (on rank 0; other mpi ranks get an empty vector). Throws
// dtrain::Error when a result is wrong.
std::vector<AllreduceBenchRow> runAllreduceBench(const AllreduceBenchConfig& config,
                                                 std::ostream& out);

}  // namespace dtrain::comm
