#pragma once
// Value types shared by every part of the communication layer: reduction
// operators, allreduce algorithms, and the per-call options (Gloo-style: each
// collective takes one options object carrying its tag and timeout).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/DType.h"

namespace dtrain::comm {

using Millis = std::chrono::milliseconds;

enum class ReduceOp : uint8_t { Sum, Avg, Min, Max };

// Allreduce algorithms. Auto picks by message size and world size; Shm is the
// shared-memory algorithm of the local (and, on one node, mpi) backend; Native is
// the MPI library's own MPI_Allreduce (mpi backend only).
enum class Algorithm : uint8_t { Auto, Ring, Rhd, Tree, Hier, Shm, Native };

const char* reduceOpName(ReduceOp op);
const char* algorithmName(Algorithm algo);
// "ring", "rhd", "tree", "hier", "shm", "native", "auto"; throws UsageError otherwise.
Algorithm algorithmFromName(const std::string& name);

// Options of one call. Fields a collective does not use are ignored (but still
// compared across ranks by the mismatch check, so pass the same on every rank).
struct Options {
  ReduceOp op = ReduceOp::Sum;       // allreduce, reduce, reduceScatter
  int root = 0;                      // broadcast, reduce
  Algorithm algo = Algorithm::Auto;  // allreduce
  int groupSize = 0;                 // hierarchical allreduce: ranks per group (0 = backend default)
  Millis timeout{0};                 // 0 = the communicator's default timeout
  int tag = 0;                       // names the call in errors; compared across ranks
};

// Kinds of collective call; part of the descriptor compared across ranks.
enum class OpKind : uint8_t {
  Allreduce, Broadcast, Reduce, Allgather, Allgatherv, ReduceScatter, Alltoall, Barrier, Split
};
const char* opKindName(OpKind kind);

// What one rank asked for in one collective call. Ranks whose descriptors differ
// would hang or corrupt memory, so every backend compares them before moving data.
struct CallDesc {
  OpKind kind = OpKind::Barrier;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  Algorithm algo = Algorithm::Auto;
  int32_t root = 0;
  int32_t tag = 0;
  int32_t groupSize = 0;
  uint64_t count = 0;
  uint64_t countsHash = 0;  // allgatherv: hash of the per-rank counts
  bool operator==(const CallDesc&) const = default;
  std::string str() const;  // "allreduce(count=1024, dtype=F32, op=sum, algo=auto, tag=0)"
};

}  // namespace dtrain::comm
