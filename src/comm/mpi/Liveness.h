#pragma once
// Liveness of the job's processes, apart from how long a call takes
// (--comm-timeout): every process of an mpi job sends a small beat to every
// other process each period from a thread of its own, and records when it last
// heard from each. A wait then fails when a peer it waits for has been silent
// longer than the limit (it died, is stopped, or its link is down), while a peer
// that is alive but busy elsewhere (an evaluation on rank 0, a checkpoint, a
// FedAvg client's local epochs, one large message on a slow link) keeps beating
// and is waited for up to the per-call limit (--call-timeout).
//
// Beats travel on MPI_COMM_WORLD under a tag of their own: dtrain's
// communicators are all duplicates, so no other message can match them. They
// are not counted as traffic (bytes_sent stays the model's payload).
#include <mpi.h>

#include <string>
#include <vector>

#include "comm/CollectiveTypes.h"
#include "comm/FlightRecorder.h"

namespace dtrain::comm::mpi {

// Starts the beat thread (no-op with one process or when running). The period is
// a fifth of the limit, at most 1 s.
void startHeartbeat(Millis silenceLimit);
// Each beat carries this recorder's state (the world communicator's): the
// peers' view of this rank for a hang's diagnosis (comm/HangReport.h). Starting
// the heartbeat makes it the diagnosis's source of the other ranks' states.
void setHeartbeatRecorder(std::shared_ptr<FlightRecorder> recorder);
// Stops it (before MPI_Finalize: no MPI call may run beside it). Idempotent.
void stopHeartbeat();

struct SilentPeer {
  int worldRank;
  Millis silence;  // since its last beat
};
// Those of `worldRanks` whose last beat is older than the limit plus `extra`.
// A peer not heard from yet counts from when this heartbeat started (every
// process starts its own right after MPI_Init, which they leave together); no
// one is judged while the heartbeat is not running.
std::vector<SilentPeer> silentPeers(const std::vector<int>& worldRanks, Millis extra = Millis{0});
// "rank 2 sent no heartbeat for 31.2 s (--comm-timeout 30 s): it died, is stopped
// or its link is down"
std::string describeSilent(const std::vector<SilentPeer>& silent);
// Throws PeerSilentError "<what>: <describeSilent>" when one of `worldRanks` is silent.
void throwIfSilent(const std::vector<int>& worldRanks, const std::string& what);

// The MPI_COMM_WORLD rank of each of `comm`'s members, in `comm`'s rank order.
std::vector<int> worldRanksOf(MPI_Comm comm);
// The same without the caller.
std::vector<int> worldPeersOf(MPI_Comm comm);

}  // namespace dtrain::comm::mpi
