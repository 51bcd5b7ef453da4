#pragma once
// State shared by the N ranks (threads) of one local communicator: per-rank
// slots for the shared-memory collectives and the call check, mailboxes for
// point-to-point, and the abort flag that turns one rank's failure into an error
// on every other rank instead of a hang.
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/Communicator.h"
#include "comm/detail/Wait.h"

namespace dtrain::comm::local {

class World;

// One rank's published state. Cache-line aligned: peers poll these fields.
struct alignas(64) Slot {
  std::atomic<uint64_t> arrived{0};   // barrier generation this rank has reached
  alignas(64) std::atomic<uint64_t> progress{0};  // (call << 32) | chunks reduced
  alignas(64) CallDesc desc[2];       // double-buffered by call parity
  const void* in = nullptr;           // buffers of the current collective
  void* out = nullptr;
  const size_t* counts = nullptr;
  int color = 0, key = 0;             // split
  std::shared_ptr<World> splitWorld;  // split: the new group's world (on its leader)
  std::unique_ptr<char[]> stage[2];   // small allreduce: a copy of the input, by call parity
};

class LocalWork;

class World : public std::enable_shared_from_this<World> {
 public:
  // Allreduces up to this size copy their input into the slot before the check's
  // barrier and reduce from the copies: one synchronization per call instead of
  // three, which is what small messages pay for.
  static constexpr size_t kSmallBytes = 256 << 10;

  explicit World(int size);
  int size() const { return size_; }
  Slot& slot(int r) { return slots_[r]; }
  comm::detail::Notifier& notifier() { return notifier_; }
  std::chrono::microseconds spin() const { return spin_; }

  // Marks the world failed because of `rank`; wakes every waiter. First call wins.
  void abort(int rank, const std::string& message);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  int failedRank() const { return failedRank_; }
  // A world split from this one (Communicator::split): aborting this one aborts
  // it too, so that ranks waiting on a sub-communicator learn of the failure.
  void adopt(const std::shared_ptr<World>& child);
  // Throws dtrain::Error "<what> aborted: rank R failed: <message>" when aborted.
  void checkAbort(const std::string& what) const;

  // Barrier by per-rank generation counters; the timeout names who never arrived.
  void arrive(int rank, uint64_t gen);
  void waitAll(uint64_t gen, const Call& call, int rank);

  // Point-to-point. Messages up to kEagerBytes are copied at send time; larger
  // ones are copied straight from the sender's buffer once the receive is posted.
  static constexpr size_t kEagerBytes = 64 << 10;
  WorkPtr isend(int src, int dst, const void* data, size_t bytes, int tag, Channel ch,
                Millis timeout);
  WorkPtr irecv(int dst, int src, void* data, size_t bytes, int tag, Channel ch, Millis timeout);

 private:
  friend class LocalWork;
  struct Envelope {
    const void* data;
    size_t bytes;
    std::vector<char> eager;
    std::shared_ptr<LocalWork> work;  // null for eager sends (already complete)
  };
  struct Posted {
    void* data;
    size_t bytes;
    std::shared_ptr<LocalWork> work;
  };
  struct Queue {
    std::deque<Envelope> sends;
    std::deque<Posted> recvs;
  };
  struct Mailbox {
    std::mutex mutex;
    std::unordered_map<uint64_t, Queue> queues;  // key: (src, channel, tag)
  };
  static uint64_t key(int src, int tag, Channel ch) {
    return (static_cast<uint64_t>(src) << 33) | (static_cast<uint64_t>(ch) << 32) |
           static_cast<uint32_t>(tag);
  }
  // Removes `work`'s pending entry; false when a peer already took it.
  bool withdraw(int dst, uint64_t k, const LocalWork* work);
  static void deliver(Envelope& e, Posted& p, int src, int dst, int tag);

  int size_;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<Mailbox[]> boxes_;  // indexed by destination rank
  comm::detail::Notifier notifier_;
  std::chrono::microseconds spin_;
  std::atomic<bool> aborted_{false};
  int failedRank_ = -1;
  std::string failure_;
  mutable std::mutex abortMutex_;
  std::vector<std::weak_ptr<World>> children_;  // under abortMutex_
};

}  // namespace dtrain::comm::local
