#pragma once
// Transport-agnostic collective algorithms, written once on top of a
// Communicator's point-to-point primitives (Channel::Internal), so every backend
// shares them. Each runs one Call on every rank; buffers follow the Communicator
// conventions (in == out is in place; Avg finishes with a 1/n scale).
#include "comm/Communicator.h"

namespace dtrain::comm::algorithms {

// Allreduce.
void ringAllreduce(Communicator& comm, Call& call);  // reduce-scatter + allgather, chunked
void rhdAllreduce(Communicator& comm, Call& call);   // Rabenseifner halving/doubling
void treeAllreduce(Communicator& comm, Call& call);  // binomial reduce + broadcast
void hierAllreduce(Communicator& comm, Call& call);  // group reduce, leaders allreduce, bcast

// The other collectives.
void treeBroadcast(Communicator& comm, Call& call);
void treeReduce(Communicator& comm, Call& call);
void ringAllgatherv(Communicator& comm, Call& call);   // uses call.counts
void ringReduceScatter(Communicator& comm, Call& call);
void pairwiseAlltoall(Communicator& comm, Call& call);
void disseminationBarrier(Communicator& comm, Call& call);

}  // namespace dtrain::comm::algorithms
