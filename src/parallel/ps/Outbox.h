#pragma once
// The server's outgoing messages to workers: nonblocking sends whose buffers
// stay alive until the message has left, so the server never waits for a
// worker to take a message (a worker declared dead may take it much later, or
// never). Sends are never withdrawn while the run goes on: a worker that comes
// back still receives, in order, every reply it is owed (withdrawing is not
// reliable on every transport: MPI cannot cancel a send).
#include <memory>
#include <vector>

#include "comm/Communicator.h"

namespace dtrain::parallel::ps {

class Outbox {
 public:
  using Buffer = std::shared_ptr<std::vector<float>>;

  ~Outbox() { cancelAll(); }

  // A buffer of `floats` that no send in flight uses (a free one is reused).
  Buffer buffer(size_t floats) {
    reap();
    for (Buffer& b : pool_)
      if (b.use_count() == 1) {
        b->resize(floats);
        return b;
      }
    pool_.push_back(std::make_shared<std::vector<float>>(floats));
    return pool_.back();
  }
  // Sends `buf` to `dst` (worker index `worker`).
  void send(comm::Communicator& comm, const Buffer& buf, int worker, int dst, int tag) {
    pending_.push_back({worker, buf, comm.isend(buf->data(), buf->size(), DType::F32, dst, tag)});
  }
  // Forgets sends that have left (rethrows a failed one).
  void reap() {
    std::erase_if(pending_, [](Entry& e) {
      if (!e.work->test()) return false;
      e.work->wait();
      return true;
    });
  }
  // Sends to `worker` still in flight, oldest first.
  std::vector<comm::WorkPtr> pendingTo(int worker) const {
    std::vector<comm::WorkPtr> out;
    for (const Entry& e : pending_)
      if (e.worker == worker) out.push_back(e.work);
    return out;
  }
  // At the end of the run: withdraws what workers never took.
  void cancelAll() {
    for (Entry& e : pending_) e.work->cancelIfPending();
    pending_.clear();
  }

 private:
  struct Entry {
    int worker;
    Buffer buf;
    comm::WorkPtr work;
  };
  std::vector<Entry> pending_;
  std::vector<Buffer> pool_;
};

}  // namespace dtrain::parallel::ps
