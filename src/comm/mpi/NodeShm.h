#pragma once
// Internal: a shared-memory segment of all ranks of one node (MPI-3 shared
// window), used by the mpi backend's `shm` allreduce. Each rank owns a header of
// progress flags and double-buffered staging and result blocks.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "comm/Communicator.h"

namespace dtrain::comm::mpi {

class NodeShm {
 public:
  static constexpr size_t kBlockBytes = 2 << 20;  // one pipeline block (all slices)
  // kCrossed: the hierarchical allreduce's slice is final (its hosts' ring done).
  enum Flag { kStaged = 0, kReduced = 1, kCopied = 2, kCrossed = 3 };

  // Collective over `comm`, whose ranks must all share this node's memory.
  explicit NodeShm(MPI_Comm comm);
  ~NodeShm();  // collective (MPI_Win_free)
  NodeShm(const NodeShm&) = delete;
  NodeShm& operator=(const NodeShm&) = delete;

  char* stage(int rank, int buf) { return base_[rank] + kHeader + buf * kBlockBytes; }
  char* result(int rank, int buf) { return base_[rank] + kHeader + (2 + buf) * kBlockBytes; }
  std::atomic_ref<uint64_t> flag(int rank, Flag f) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base_[rank] + 64 * f));
  }
  uint64_t nextBlock() { return next_++; }  // same sequence on every rank

  // Cross-memory attach (process_vm_readv): when the kernel lets ranks read each
  // other's memory, the allreduce reads peers' buffers directly, as the local
  // backend does with threads, instead of staging them through the window.
  bool cma() const { return cma_; }
  int pid(int rank) const { return pids_[rank]; }
  // Buffers of the current call, published in the header.
  std::atomic_ref<uint64_t> word(int rank, int slot) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base_[rank] + 256 + 8 * slot));
  }
  uint64_t nextCall() { return calls_++; }
  // MPI_COMM_WORLD rank of each rank of the window (heartbeats of lagging peers).
  int worldRank(int rank) const { return worldRanks_[rank]; }
  char* tmp(size_t bytes) {
    if (tmp_.size() < bytes) tmp_.resize(bytes);
    return tmp_.data();
  }

 private:
  static constexpr size_t kHeader = 4096;
  MPI_Win win_ = MPI_WIN_NULL;
  std::vector<char*> base_;
  uint64_t next_ = 0;
  uint64_t calls_ = 0;
  bool cma_ = false;
  std::vector<int> pids_;
  std::vector<int> worldRanks_;  // MPI_COMM_WORLD rank of each rank of the window
  std::vector<int> worldPeers_;  // the same without this rank (the watchdog's scopes)
  std::vector<char> tmp_;
};

// Waits until flag `f` of every rank in [lo, hi) of the segment reaches `want`:
// spins for `spin`, then yields, then naps; throws at the call's deadline naming
// the lagging ranks (and at --comm-timeout when one of them stopped beating).
void waitShmFlags(NodeShm& shm, NodeShm::Flag f, uint64_t want, int lo, int hi, const Call& call,
                  int rank, std::chrono::microseconds spin);

}  // namespace dtrain::comm::mpi
