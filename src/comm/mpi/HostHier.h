#pragma once
// Internal: the mpi backend's hierarchical allreduce for ranks on several hosts,
// through shared memory inside each host (MpiHier.cpp). Every rank of a host
// owns a slice of each block: the host's ranks reduce their slices from every
// local rank's staged input in the host's shared segment, each runs the ring
// between hosts on its slice (with the ranks of the same local index on the
// other hosts), and every local rank copies the final slices out of the
// segment. Blocks are pipelined: the next block is staged and reduced while the
// ring of the previous one crosses the network (on the cross communicator's
// progress thread).
#include <mpi.h>

#include <memory>

#include "comm/Communicator.h"
#include "comm/mpi/NodeShm.h"

namespace dtrain::comm::mpi {

struct HostGroups {
  MPI_Comm node = MPI_COMM_NULL;        // the ranks of this host
  int localRank = 0, localSize = 1;
  std::unique_ptr<NodeShm> shm;         // over `node`
  std::unique_ptr<Communicator> cross;  // the ranks of this local rank on every host
  ~HostGroups();                        // collective over `node` (frees the window)
  // Leaves the window and communicators to the OS (unwinding an error: the
  // peers may never come to a collective free).
  void abandon();
};

// One allreduce through `hosts` (every rank of the parent calls it). `spin`:
// how long a wait for a local peer spins before it yields.
void hostAllreduce(HostGroups& hosts, Call& call, int worldSize, std::chrono::microseconds spin);

}  // namespace dtrain::comm::mpi
