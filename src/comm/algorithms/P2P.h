#pragma once
// Small helpers over the internal point-to-point channel used by the algorithms.
#include <vector>

#include "comm/Communicator.h"
#include "comm/detail/Check.h"

namespace dtrain::comm::algorithms::detail {

// Internal tags, one per algorithm, so that their messages never match each other.
enum Tag : int {
  kRing = 10, kRhd, kTreeReduce, kTreeBcast, kAllgatherv, kReduceScatter, kAlltoall, kBarrier
};

inline WorkPtr postSend(Communicator& c, const void* p, size_t bytes, int dst, int tag) {
  return c.isendBytes(p, bytes, dst, tag, Channel::Internal);
}
inline WorkPtr postRecv(Communicator& c, void* p, size_t bytes, int src, int tag) {
  return c.irecvBytes(p, bytes, src, tag, Channel::Internal);
}
inline void finish(const WorkPtr& w, const Call& call) { w->wait(comm::detail::remaining(call)); }
inline void finishAll(std::vector<WorkPtr>& ws, const Call& call) {
  for (auto& w : ws) finish(w, call);
  ws.clear();
}

// Sends sbytes to dst while receiving rbytes from src (either may be 0 bytes).
inline void sendRecv(Communicator& c, const Call& call, const void* s, size_t sbytes, int dst,
                     void* r, size_t rbytes, int src, int tag) {
  WorkPtr rw = postRecv(c, r, rbytes, src, tag);
  WorkPtr sw = postSend(c, s, sbytes, dst, tag);
  finish(rw, call);
  finish(sw, call);
}

// Start of block i when `count` elements are cut into n nearly equal blocks.
inline size_t blockStart(size_t count, int n, int i) {
  // floor(count * i / n) without overflow: count = q*n + m.
  return count / n * i + count % n * i / n;
}

inline char* at(void* p, size_t elems, size_t es) { return static_cast<char*>(p) + elems * es; }
inline const char* at(const void* p, size_t elems, size_t es) {
  return static_cast<const char*>(p) + elems * es;
}

}  // namespace dtrain::comm::algorithms::detail
