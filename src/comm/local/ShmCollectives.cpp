// Direct shared-memory collectives of the local backend. checkCall() has already
// published every rank's buffers and passed a barrier, so each rank reads its
// peers' buffers directly: no intermediate copies. Each ends with a barrier so
// that no rank returns (and reuses its buffers) while a peer still reads them.
#include <algorithm>
#include <cstring>

#include "comm/algorithms/P2P.h"
#include "comm/detail/ReduceKernels.h"
#include "comm/local/LocalCommunicator.h"

namespace dtrain::comm::local {

using algorithms::detail::blockStart;

namespace {
// Chunks are small enough that a freshly reduced chunk is still in cache when the
// peers copy it, large enough that the progress flags are not contended.
constexpr size_t kChunkBytes = 64 << 10;
}  // namespace

void LocalCommunicator::shmAllreduce(Call& call) {
  const int n = size(), r = rank();
  const size_t count = call.desc.count, es = call.elemSize();
  const DType dt = call.desc.dtype;
  const ReduceOp op = call.desc.op;
  // More ranks than cores: every hand-off may cost a context switch, so take
  // whole slices (fewer, larger waits) instead of pipelining by chunk.
  const size_t chunk = world_->spin().count() > 0 ? std::max<size_t>(1, kChunkBytes / es)
                                                  : std::max<size_t>(1, count);
  const uint64_t tagBits = calls_ << 32;  // same value on every rank for this call
  if (smallAllreduce(call)) {
    // Every input was staged before the check's barrier: reduce the copies, and
    // return without another barrier (nobody reads this rank's buffers). Every
    // rank sums in rank order, so all ranks get bitwise the same result.
    std::vector<const void*> staged(n);
    for (int k = 0; k < n; ++k) staged[k] = world_->slot(k).stage[(calls_ - 1) & 1].get();
    comm::detail::reduceMany(call.out, staged.data(), n, count, call.desc.dtype, call.desc.op);
    if (call.desc.op == ReduceOp::Avg) comm::detail::scaleForAvg(call.out, count, call.desc.dtype, n);
    return;
  }
  std::vector<const void*> srcs(n);
  // Own input first: in place, out aliases it.
  for (int k = 0; k < n; ++k) srcs[k] = world_->slot((r + k) % n).in;
  char* out = static_cast<char*>(call.out);
  auto sliceLo = [&](int j) { return blockStart(count, n, j); };
  auto chunks = [&](int j) { return (sliceLo(j + 1) - sliceLo(j) + chunk - 1) / chunk; };
  size_t maxChunks = 0;
  for (int j = 0; j < n; ++j) maxChunks = std::max(maxChunks, chunks(j));
  std::vector<const void*> s(n);
  Slot& me = world_->slot(r);
  for (size_t c = 0; c < maxChunks; ++c) {
    // Reduce chunk c of this rank's slice, straight from every rank's input.
    if (c < chunks(r)) {
      size_t lo = sliceLo(r) + c * chunk, len = std::min(chunk, sliceLo(r + 1) - lo);
      for (int k = 0; k < n; ++k) s[k] = static_cast<const char*>(srcs[k]) + lo * es;
      comm::detail::reduceMany(out + lo * es, s.data(), n, len, dt, op);
      if (op == ReduceOp::Avg) comm::detail::scaleForAvg(out + lo * es, len, dt, n);
      me.progress.store(tagBits | (c + 1), std::memory_order_release);
      world_->notifier().notify();
    }
    // Copy chunk c of every peer's reduced slice.
    for (int k = 1; k < n; ++k) {
      int j = (r + k) % n;
      if (c >= chunks(j)) continue;
      Slot& peer = world_->slot(j);
      const uint64_t want = tagBits | (c + 1);
      auto ready = [&] { return peer.progress.load(std::memory_order_acquire) >= want; };
      if (!ready() && !comm::detail::waitUntil(ready, call.deadline,
                                               [&] { world_->checkAbort(call.name(r)); },
                                               &world_->notifier(), world_->spin()))
        comm::detail::throwNotArrived(call, r, {j});
      size_t lo = sliceLo(j) + c * chunk, len = std::min(chunk, sliceLo(j + 1) - lo);
      std::memcpy(out + lo * es, static_cast<const char*>(peer.out) + lo * es, len * es);
    }
  }
  barrier(call);
}

void LocalCommunicator::shmBroadcast(Call& call) {
  const int root = call.desc.root;
  const size_t bytes = call.desc.count * call.elemSize();
  if (rank() != root && bytes) std::memcpy(call.out, world_->slot(root).out, bytes);
  barrier(call);
}

void LocalCommunicator::shmReduce(Call& call) {
  // Each rank reduces its slice straight into the root's output.
  const int n = size(), r = rank(), root = call.desc.root;
  const size_t count = call.desc.count, es = call.elemSize();
  size_t lo = blockStart(count, n, r), len = blockStart(count, n, r + 1) - lo;
  if (len) {
    std::vector<const void*> s(n);
    // The root's input first: it may alias the root's output.
    for (int k = 0; k < n; ++k)
      s[k] = static_cast<const char*>(world_->slot((root + k) % n).in) + lo * es;
    char* dst = static_cast<char*>(world_->slot(root).out) + lo * es;
    comm::detail::reduceMany(dst, s.data(), n, len, call.desc.dtype, call.desc.op);
    if (call.desc.op == ReduceOp::Avg) comm::detail::scaleForAvg(dst, len, call.desc.dtype, n);
  }
  barrier(call);
}

void LocalCommunicator::shmAllgatherv(Call& call) {
  const int n = size(), r = rank();
  const size_t es = call.elemSize();
  char* out = static_cast<char*>(call.out);
  size_t off = 0;
  for (int k = 0; k < n; ++k) {
    size_t bytes = call.counts[k] * es;
    const void* src = k == r ? call.in : world_->slot(k).in;
    if (bytes && src != out + off) std::memcpy(out + off, src, bytes);
    off += bytes;
  }
  barrier(call);
}

void LocalCommunicator::shmReduceScatter(Call& call) {
  const int n = size(), r = rank();
  const size_t count = call.desc.count, es = call.elemSize();
  if (count) {
    std::vector<const void*> s(n);
    for (int k = 0; k < n; ++k)
      s[k] = static_cast<const char*>(world_->slot(k).in) + r * count * es;
    comm::detail::reduceMany(call.out, s.data(), n, count, call.desc.dtype, call.desc.op);
    if (call.desc.op == ReduceOp::Avg) comm::detail::scaleForAvg(call.out, count, call.desc.dtype, n);
  }
  barrier(call);
}

void LocalCommunicator::shmAlltoall(Call& call) {
  const int n = size(), r = rank();
  const size_t bytes = call.desc.count * call.elemSize();
  char* out = static_cast<char*>(call.out);
  for (int k = 0; k < n && bytes; ++k)
    std::memcpy(out + k * bytes, static_cast<const char*>(world_->slot(k).in) + r * bytes, bytes);
  barrier(call);
}

}  // namespace dtrain::comm::local
