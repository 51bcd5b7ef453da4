#include "comm/detail/Traffic.h"

#include "comm/algorithms/P2P.h"

namespace dtrain::comm::detail {

namespace {

// Elements contributed by rank k to an allgather(v).
uint64_t contributed(const Call& call, int k) {
  return call.counts.empty() ? call.desc.count : call.counts[k];
}
uint64_t gathered(const Call& call, int size) {
  uint64_t t = 0;
  for (int k = 0; k < size; ++k) t += contributed(call, k);
  return t;
}

// Children of `rank` in a binomial tree over `size` ranks rooted at `root`.
int binomialChildren(int rank, int size, int root) {
  const int v = (rank - root + size) % size;
  int children = 0;
  for (int step = 1; step < size; step <<= 1) {
    if (v & step) break;  // v's parent is v - step: no children at this or larger steps
    if (v + step < size) ++children;
  }
  return children;
}

}  // namespace

Traffic shmTraffic(const Call& call, int rank, int size, bool staged) {
  const uint64_t n = size, es = call.elemSize(), count = call.desc.count;
  const uint64_t lo = algorithms::detail::blockStart(count, size, rank);
  const uint64_t len = algorithms::detail::blockStart(count, size, rank + 1) - lo;  // my slice
  const bool root = rank == call.desc.root;
  Traffic t;
  switch (call.desc.kind) {
    case OpKind::Allreduce:
      if (staged) {
        t.sent = t.received = (n - 1) * count * es;
      } else {
        // Reduce my slice from n-1 peers' inputs, peers read theirs from mine; then
        // every peer copies my reduced slice and I copy theirs.
        t.sent = t.received = ((count - len) + (n - 1) * len) * es;
      }
      break;
    case OpKind::Broadcast:
      t.sent = root ? (n - 1) * count * es : 0;
      t.received = root ? 0 : count * es;
      break;
    case OpKind::Reduce:
      // Each rank reduces its slice from every input into the root's output.
      t.received = ((n - 1) * len + (root ? count - len : 0)) * es;
      t.sent = ((count - len) + (root ? 0 : len)) * es;
      break;
    case OpKind::Allgather: case OpKind::Allgatherv:
      t.received = (gathered(call, size) - contributed(call, rank)) * es;
      t.sent = (n - 1) * contributed(call, rank) * es;
      break;
    case OpKind::ReduceScatter: case OpKind::Alltoall:
      t.sent = t.received = (n - 1) * count * es;
      break;
    case OpKind::Barrier: case OpKind::Split: break;
  }
  return t;
}

Traffic nativeTraffic(const Call& call, int rank, int size) {
  const uint64_t n = size, es = call.elemSize(), count = call.desc.count, bytes = count * es;
  Traffic t;
  switch (call.desc.kind) {
    case OpKind::Allreduce:
      t.sent = t.received = 2 * (n - 1) * bytes / n;
      break;
    case OpKind::Broadcast:
      t.sent = binomialChildren(rank, size, call.desc.root) * bytes;
      t.received = rank == call.desc.root ? 0 : bytes;
      break;
    case OpKind::Reduce:
      t.received = binomialChildren(rank, size, call.desc.root) * bytes;
      t.sent = rank == call.desc.root ? 0 : bytes;
      break;
    case OpKind::Allgather: case OpKind::Allgatherv:
      // Ring: every block but the next rank's passes through; every block but mine arrives.
      t.sent = (gathered(call, size) - contributed(call, (rank + 1) % size)) * es;
      t.received = (gathered(call, size) - contributed(call, rank)) * es;
      break;
    case OpKind::ReduceScatter: case OpKind::Alltoall:
      t.sent = t.received = (n - 1) * bytes;
      break;
    case OpKind::Barrier: case OpKind::Split: break;
  }
  return t;
}

}  // namespace dtrain::comm::detail
