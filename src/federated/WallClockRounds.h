#pragma once
// `--deadline-clock wall` over `--backend mpi`: rounds as a real deployment runs them.
// The server (rank 0) sends the round number and the global model to every idle
// host that has clients in the round, then takes the clients' updates as they
// arrive, one message per client, until all have come or `--round-deadline-s`
// seconds of wall time have passed: a slow host (a slow link, a slow machine)
// really is late, and its clients are left out of the round. A host still busy
// with an earlier round is not sent the new one (its clients count as late this
// round); its late updates are received and discarded when they come.
//
// Unlike the simulated clock's symmetric allgather (every rank applies the same
// aggregate), only the server holds the global model here: it is the real
// message pattern, one model down per busy-free host, one update up per client.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "comm/Communicator.h"
#include "comm/Work.h"
#include "federated/LocalTrainer.h"

namespace dtrain::federated {

class RoundServer {
 public:
  RoundServer(comm::Communicator& comm, size_t modelSize);
  ~RoundServer();  // withdraws the receives still posted (finish() does, before MPI ends)

  // Runs the network side of one round. owners[i]: the host rank that trains
  // reporter i. Fills results[i] for every update that arrived within deadlineS
  // seconds of wall time (0: no deadline, wait for all); returns which did.
  std::vector<char> collect(int64_t round, std::span<const float> global,
                            const std::vector<int>& owners, double deadlineS,
                            std::vector<ClientResult>& results);
  // After the last round: waits for the busy hosts' late updates, then tells
  // every host to stop.
  void finish();

 private:
  // One completed receive from `host`: stores it when it is of `round`.
  void take(int host, int64_t round, std::vector<ClientResult>& results, std::vector<char>& arrived,
            int& expecting);
  void post(int host);
  comm::Communicator& comm_;
  size_t modelSize_;
  std::vector<int> outstanding_;               // per host: updates still to come
  std::vector<std::vector<float>> inbox_, outbox_;
  std::vector<comm::WorkPtr> receiving_, sending_;
  bool finished_ = false;
};

class RoundHost {
 public:
  RoundHost(comm::Communicator& comm, size_t modelSize);
  ~RoundHost();
  // Blocks until the server sends a round; fills `global`. nullopt: stop.
  std::optional<int64_t> next(std::vector<float>& global);
  // Sends reporter `index`'s update of `round` (asynchronously).
  void send(int64_t round, size_t index, const ClientResult& result);
  // Waits until every update sent has left.
  void flush();

 private:
  comm::Communicator& comm_;
  size_t modelSize_;
  std::vector<float> inbox_;
  std::vector<std::pair<std::vector<float>, comm::WorkPtr>> sent_;
};

}  // namespace dtrain::federated
