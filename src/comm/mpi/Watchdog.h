#pragma once
// The mpi backend's last line of defence against a hang (--comm-timeout). Waits
// that dtrain drives (MPI_Test polls) already end at their deadline with a
// TimeoutError naming the ranks that never came; a call that blocks inside the
// MPI library (a blocking collective, MPI_Comm_split, the shared window's setup
// and free, MPI_Finalize's fence) cannot. A BlockingScope marks such a call; a
// thread checks the open scopes every 200 ms and, when one has been open longer
// than the per-call timeout (--call-timeout) plus a grace, or when one of the
// peers it waits for has sent no heartbeat for longer than --comm-timeout plus a
// grace (Liveness.h; the grace lets a deadline-driven wait throw first, with its
// better message), prints one line naming the call and the peers it waits for
// and calls MPI_Abort: mpirun then ends every rank.
#include <string>
#include <vector>

#include "comm/CollectiveTypes.h"

namespace dtrain::comm::mpi {

// The timeout the watchdog applies to scopes opened without one (finalize).
void setWatchdogTimeout(Millis timeout);
Millis watchdogTimeout();

class BlockingScope {
 public:
  // `what`: the call ("MPI_Allreduce (allreduce #12 on rank 0)"); `peers`: whom
  // it waits for ("ranks 1, 2" or "the other 3 ranks"). timeout 0: the watchdog's.
  // `worldPeers`: their MPI_COMM_WORLD ranks, whose heartbeats are watched (none:
  // only the per-call timeout, as for MPI_Finalize once beats have stopped).
  BlockingScope(std::string what, std::string peers, Millis timeout = Millis{0},
                std::vector<int> worldPeers = {});
  ~BlockingScope();
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;

 private:
  long id_;
};

}  // namespace dtrain::comm::mpi
