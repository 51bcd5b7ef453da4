#include "comm/local/World.h"

#include <cstring>

#include "comm/detail/Check.h"
#include "core/Error.h"

namespace dtrain::comm::local {

using dtrain::detail::concat;

// A pending point-to-point operation of the local backend.
class LocalWork : public Work {
 public:
  LocalWork(World* world, std::string what, Millis timeout, int peer, bool isSend, int box,
            uint64_t key)
      : Work(std::move(what), timeout), world_(world->weak_from_this()), peer_(peer),
        isSend_(isSend), box_(box), key_(key) {
    setSpin(world->spin());
  }

 protected:
  // The world may be gone when a Work outlives every communicator: then nothing
  // can complete it any more, and there is nothing to withdraw from.
  void check() override {
    if (auto w = world_.lock()) w->checkAbort(what());
  }
  void cancel() override {
    // Withdrawn once already: a second cancel must not wait for a completion
    // that can no longer come.
    if (withdrawn_) return;
    auto w = world_.lock();
    if (!w || w->withdraw(box_, key_, this)) {
      withdrawn_ = true;
      return;
    }
    // A peer matched it and is copying right now: let the copy finish so that it
    // never writes into a buffer the caller is about to release.
    while (!finished()) comm::detail::cpuRelax();
  }
  std::string pendingDetail() const override {
    return concat("rank ", peer_, isSend_ ? " never received it" : " never sent it");
  }

 private:
  std::weak_ptr<World> world_;
  int peer_;
  bool isSend_;
  int box_;
  uint64_t key_;
  bool withdrawn_ = false;  // cancel() is called by the work's owner only
};

World::World(int size)
    : size_(size), slots_(new Slot[size]), boxes_(new Mailbox[size]),
      spin_(comm::detail::spinTime(size)) {
  for (int r = 0; r < size; ++r)
    for (auto& s : slots_[r].stage) s.reset(new char[kSmallBytes]);
}

void World::abort(int rank, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(abortMutex_);
    if (aborted_.load()) return;
    failedRank_ = rank;
    failure_ = message;
    aborted_.store(true, std::memory_order_release);
  }
  notifier_.notify();
  std::vector<std::weak_ptr<World>> children;
  {
    std::lock_guard<std::mutex> lock(abortMutex_);
    children.swap(children_);
  }
  for (auto& c : children)
    if (auto child = c.lock()) child->abort(rank, message);
}

void World::adopt(const std::shared_ptr<World>& child) {
  {
    std::lock_guard<std::mutex> lock(abortMutex_);
    if (!aborted_.load()) {
      children_.push_back(child);
      return;
    }
  }
  child->abort(failedRank_, failure_);
}

void World::checkAbort(const std::string& what) const {
  if (!aborted()) return;
  std::lock_guard<std::mutex> lock(abortMutex_);
  throw Error(concat(what, ": aborted because rank ", failedRank_, " failed: ", failure_));
}

void World::arrive(int rank, uint64_t gen) {
  slots_[rank].arrived.store(gen, std::memory_order_seq_cst);
  notifier_.notify();
}

void World::waitAll(uint64_t gen, const Call& call, int rank) {
  auto ready = [&] {
    for (int r = 0; r < size_; ++r)
      if (slots_[r].arrived.load(std::memory_order_acquire) < gen) return false;
    return true;
  };
  if (ready()) return;
  bool ok = comm::detail::waitUntil(ready, call.deadline,
                                    [&] { checkAbort(call.name(rank)); }, &notifier_, spin_);
  if (ok) return;
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r)
    if (slots_[r].arrived.load(std::memory_order_acquire) < gen) missing.push_back(r);
  comm::detail::throwNotArrived(call, rank, missing);
}

void World::deliver(Envelope& e, Posted& p, int src, int dst, int tag) {
  if (e.bytes != p.bytes) {
    auto err = std::make_exception_ptr(Error(concat(
        "comm: message size mismatch: rank ", src, " sent ", e.bytes, " bytes with tag ", tag,
        ", rank ", dst, " posted a receive of ", p.bytes, " bytes")));
    if (e.work) e.work->fail(err);
    p.work->fail(err);
    return;
  }
  if (e.bytes) std::memcpy(p.data, e.eager.empty() ? e.data : e.eager.data(), e.bytes);
  if (e.work) e.work->complete();
  p.work->complete();
}

WorkPtr World::isend(int src, int dst, const void* data, size_t bytes, int tag, Channel ch,
                     Millis timeout) {
  const uint64_t k = key(src, tag, ch);
  Mailbox& box = boxes_[dst];
  std::unique_lock<std::mutex> lock(box.mutex);
  Queue& q = box.queues[k];
  bool eager = bytes <= kEagerBytes;
  std::shared_ptr<LocalWork> work;
  auto makeWork = [&] {
    return std::make_shared<LocalWork>(
        this, concat("send of ", bytes, " bytes from rank ", src, " to rank ", dst, " (tag ", tag,
                     ch == Channel::Internal ? ", internal)" : ")"),
        timeout, dst, true, dst, k);
  };
  if (!q.recvs.empty()) {
    Posted p = std::move(q.recvs.front());
    q.recvs.pop_front();
    lock.unlock();
    work = makeWork();
    Envelope e{data, bytes, {}, work};
    deliver(e, p, src, dst, tag);
    return work;
  }
  work = makeWork();
  if (eager) {
    Envelope e{data, bytes, std::vector<char>(static_cast<const char*>(data),
                                              static_cast<const char*>(data) + bytes), nullptr};
    q.sends.push_back(std::move(e));
    lock.unlock();
    work->complete();
  } else {
    q.sends.push_back(Envelope{data, bytes, {}, work});
  }
  return work;
}

WorkPtr World::irecv(int dst, int src, void* data, size_t bytes, int tag, Channel ch,
                     Millis timeout) {
  const uint64_t k = key(src, tag, ch);
  Mailbox& box = boxes_[dst];
  auto work = std::make_shared<LocalWork>(
      this, concat("recv of ", bytes, " bytes on rank ", dst, " from rank ", src, " (tag ", tag,
                   ch == Channel::Internal ? ", internal)" : ")"),
      timeout, src, false, dst, k);
  std::unique_lock<std::mutex> lock(box.mutex);
  Queue& q = box.queues[k];
  if (!q.sends.empty()) {
    Envelope e = std::move(q.sends.front());
    q.sends.pop_front();
    lock.unlock();
    Posted p{data, bytes, work};
    deliver(e, p, src, dst, tag);
    return work;
  }
  q.recvs.push_back(Posted{data, bytes, work});
  return work;
}

bool World::withdraw(int dst, uint64_t k, const LocalWork* work) {
  Mailbox& box = boxes_[dst];
  std::lock_guard<std::mutex> lock(box.mutex);
  auto it = box.queues.find(k);
  if (it == box.queues.end()) return false;
  auto& sends = it->second.sends;
  for (auto s = sends.begin(); s != sends.end(); ++s)
    if (s->work.get() == work) {
      sends.erase(s);
      return true;
    }
  auto& recvs = it->second.recvs;
  for (auto r = recvs.begin(); r != recvs.end(); ++r)
    if (r->work.get() == work) {
      recvs.erase(r);
      return true;
    }
  return false;
}

}  // namespace dtrain::comm::local
