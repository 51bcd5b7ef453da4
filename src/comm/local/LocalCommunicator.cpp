#include "comm/local/LocalCommunicator.h"

#include <algorithm>
#include <cstring>

#include "comm/detail/Check.h"
#include "comm/detail/Traffic.h"
#include "core/Error.h"

namespace dtrain::comm::local {

LocalCommunicator::LocalCommunicator(std::shared_ptr<World> world, int rank, Millis timeout)
    : Communicator(rank, world->size(), timeout), world_(std::move(world)) {}

LocalCommunicator::~LocalCommunicator() { stopProgressThread(); }

WorkPtr LocalCommunicator::isendBytes(const void* data, size_t bytes, int dst, int tag,
                                      Channel ch) {
  world_->checkAbort(dtrain::detail::concat("send from rank ", rank(), " to rank ", dst));
  countSent(bytes);
  return world_->isend(rank(), dst, data, bytes, tag, ch, timeout());
}

WorkPtr LocalCommunicator::irecvBytes(void* data, size_t bytes, int src, int tag, Channel ch) {
  world_->checkAbort(dtrain::detail::concat("recv on rank ", rank(), " from rank ", src));
  countReceived(bytes);
  return world_->irecv(rank(), src, data, bytes, tag, ch, timeout());
}

bool LocalCommunicator::supports(Algorithm algo) const {
  return algo == Algorithm::Shm || Communicator::supports(algo);
}

Algorithm LocalCommunicator::chooseAllreduce(size_t) const { return Algorithm::Shm; }

void LocalCommunicator::barrier(const Call& call) {
  world_->arrive(rank(), ++barrierGen_);
  world_->waitAll(barrierGen_, call, rank());
}

bool LocalCommunicator::smallAllreduce(const Call& call) const {
  return call.desc.kind == OpKind::Allreduce &&
         (call.desc.algo == Algorithm::Shm || call.desc.algo == Algorithm::Auto) &&
         size() > 1 &&
         // Each rank reads all n copies: cap the total at 512 KiB per rank.
         call.desc.count * call.elemSize() <= std::min<size_t>(World::kSmallBytes, (size_t{512} << 10) / size());
}

void LocalCommunicator::checkCall(const Call& call) {
  Slot& me = world_->slot(rank());
  const uint64_t parity = calls_++ & 1;
  me.desc[parity] = call.desc;
  me.in = call.in;
  me.out = call.out;
  me.counts = call.counts.empty() ? nullptr : call.counts.data();
  if (smallAllreduce(call) && call.desc.count)
    std::memcpy(me.stage[parity].get(), call.in, call.desc.count * call.elemSize());
  barrier(call);
  std::vector<CallDesc> descs(size());
  for (int r = 0; r < size(); ++r) descs[r] = world_->slot(r).desc[parity];
  comm::detail::compareCalls(call, rank(), descs);
}

void LocalCommunicator::execute(Call& call) {
  if (size() == 1) {
    // No peers: every collective is a copy (or nothing).
    const size_t es = call.elemSize(), n = call.desc.count;
    auto copy = [&](const void* s, void* d, size_t elems) {
      if (elems && s != d) std::memcpy(d, s, elems * es);
    };
    switch (call.desc.kind) {
      case OpKind::Allreduce: case OpKind::Reduce: case OpKind::ReduceScatter:
      case OpKind::Allgather: case OpKind::Allgatherv: case OpKind::Alltoall:
        copy(call.in, call.out, n);
        return;
      default: return;
    }
  }
  Algorithm a = call.desc.algo == Algorithm::Auto ? chooseAllreduce(0) : call.desc.algo;
  if (call.desc.kind != OpKind::Allreduce || a == Algorithm::Shm) {
    // Shared memory, not the mailboxes: count what this rank reads from its peers.
    auto t = comm::detail::shmTraffic(call, rank(), size(), smallAllreduce(call));
    countSent(t.sent);
    countReceived(t.received);
  }
  switch (call.desc.kind) {
    case OpKind::Allreduce:
      if (a == Algorithm::Shm) return shmAllreduce(call);
      return Communicator::execute(call);
    case OpKind::Broadcast: return shmBroadcast(call);
    case OpKind::Reduce: return shmReduce(call);
    case OpKind::Allgather:
      call.counts.assign(size(), call.desc.count);
      return shmAllgatherv(call);
    case OpKind::Allgatherv: return shmAllgatherv(call);
    case OpKind::ReduceScatter: return shmReduceScatter(call);
    case OpKind::Alltoall: return shmAlltoall(call);
    case OpKind::Barrier: return;  // the check was the barrier
    case OpKind::Split: return;
  }
}

std::unique_ptr<Communicator> LocalCommunicator::splitImpl(int color, int key, Call& call) {
  if (size() == 1) {
    if (color < 0) return nullptr;
    return std::make_unique<LocalCommunicator>(std::make_shared<World>(1), 0, timeout());
  }
  Slot& me = world_->slot(rank());
  me.color = color;
  me.key = key;
  barrier(call);
  std::vector<int> members;
  for (int r = 0; r < size(); ++r)
    if (color >= 0 && world_->slot(r).color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return world_->slot(a).key < world_->slot(b).key;
  });
  if (!members.empty() && members.front() == rank()) {
    me.splitWorld = std::make_shared<World>(static_cast<int>(members.size()));
    world_->adopt(me.splitWorld);
  }
  barrier(call);
  std::unique_ptr<Communicator> sub;
  if (color >= 0) {
    int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    sub = std::make_unique<LocalCommunicator>(world_->slot(members.front()).splitWorld, newRank,
                                              timeout());
  }
  barrier(call);  // everyone holds its reference before the leader drops its own
  me.splitWorld.reset();
  return sub;
}

}  // namespace dtrain::comm::local
