#pragma once
// Bytes a collective moves for one rank where they do not pass through
// isendBytes/irecvBytes (which count themselves): the shared-memory collectives,
// and the MPI library's own collectives.
#include <cstdint>

#include "comm/Communicator.h"

namespace dtrain::comm::detail {

struct Traffic {
  uint64_t sent = 0, received = 0;
};

// Direct-read shared-memory collectives (local backend; mpi `shm` on one node):
// exact for their data flow, counting the bytes a rank reads out of a peer's
// buffers as the peer's sent and the reader's received (and a write into a
// peer's buffer, shm reduce, as the writer's sent). `staged`: the small
// allreduce in which every rank reads every peer's whole staged input.
Traffic shmTraffic(const Call& call, int rank, int size, bool staged = false);

// MPI's native collectives. The library picks its algorithm at run time and
// does not report what it sent, so this is a formula: what the bandwidth-optimal
// algorithm sends (ring allreduce, reduce-scatter and allgather, binomial-tree
// broadcast and reduce, pairwise alltoall). OpenMPI's choice may send more (e.g.
// recursive doubling for small allreduces): treat it as a lower bound.
Traffic nativeTraffic(const Call& call, int rank, int size);

}  // namespace dtrain::comm::detail
