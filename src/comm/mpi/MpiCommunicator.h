#pragma once
// Internal: the mpi backend's communicator. Users see only Communicator.
#include <mpi.h>

#include <memory>
#include <vector>

#include "comm/Communicator.h"

namespace dtrain::comm::mpi {

class NodeShm;
struct HostGroups;

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` (a duplicate it may free).
  MpiCommunicator(MPI_Comm comm, Millis timeout);
  ~MpiCommunicator() override;
  const char* backend() const override { return "mpi"; }

  WorkPtr isendBytes(const void* data, size_t bytes, int dst, int tag, Channel ch) override;
  WorkPtr irecvBytes(void* data, size_t bytes, int src, int tag, Channel ch) override;
  bool supports(Algorithm algo) const override;
  Algorithm chooseAllreduce(size_t bytes) const override;
  int defaultGroupSize() const override { return nodeGroup_; }

 protected:
  void execute(Call& call) override;
  std::unique_ptr<Communicator> splitImpl(int color, int key, Call& call) override;

 private:
  void native(Call& call);
  // Whether a collective is too large for OpenMPI's nonblocking-collective
  // library (see the .cpp): then dtrain's algorithms run it.
  bool largeForLibnbc(const Call& call) const;
  static constexpr size_t kLibnbcMaxBytes = size_t{4} << 20;
  // Waits for a nonblocking MPI collective until the call's deadline.
  void waitRequest(MPI_Request& req, const Call& call);
  void shmAllreduce(Call& call);  // MpiShm.cpp: staged through the shared window
  void cmaAllreduce(Call& call);  // MpiShm.cpp: direct, with process_vm_readv
  // Whether a `hier` call runs through each host's shared memory (HostHier.h):
  // ranks on several hosts, as many on each, grouped by host.
  bool hierThroughHosts(const Call& call) const;
  void hostHierAllreduce(Call& call);
  std::unique_ptr<HostGroups> makeHostGroups(const Call& call);

  MPI_Comm user_, internal_;  // user point-to-point; collectives and algorithms
  std::vector<int> worldRanks_;  // MPI_COMM_WORLD rank of each rank (heartbeats)
  std::vector<int> worldPeers_;  // the same without this rank
  bool oneNode_ = false;      // every rank shares this node's memory
  bool oversubscribed_ = false;  // more ranks on this node than cores
  int nodeGroup_ = 1;         // ranks per node (the hierarchical default)
  bool uniformNodes_ = false;  // as many ranks on every node
  std::chrono::microseconds spin_{0};  // busy-wait before yielding (detail::spinTime)
  std::unique_ptr<NodeShm> shm_;
  std::unique_ptr<HostGroups> hosts_;  // made by the first `hier` across hosts
};

}  // namespace dtrain::comm::mpi
