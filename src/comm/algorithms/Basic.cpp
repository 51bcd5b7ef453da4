// Alltoall (pairwise exchange), barrier (dissemination) and the hierarchical
// allreduce, which composes collectives of sub-communicators.
#include <algorithm>
#include <cstring>

#include "comm/algorithms/Algorithms.h"
#include "comm/algorithms/P2P.h"
#include "comm/detail/ReduceKernels.h"

namespace dtrain::comm::algorithms {

using namespace detail;

void pairwiseAlltoall(Communicator& c, Call& call) {
  const int n = c.size(), r = c.rank();
  const size_t bytes = call.desc.count * call.elemSize();
  const char* in = static_cast<const char*>(call.in);
  char* out = static_cast<char*>(call.out);
  if (bytes) std::memcpy(out + r * bytes, in + r * bytes, bytes);
  for (int s = 1; s < n && bytes; ++s) {
    int dst = (r + s) % n, src = (r - s + n) % n;
    sendRecv(c, call, in + dst * bytes, bytes, dst, out + src * bytes, bytes, src, kAlltoall);
  }
}

void disseminationBarrier(Communicator& c, Call& call) {
  const int n = c.size(), r = c.rank();
  char token = 0, sink = 0;
  for (int d = 1; d < n; d *= 2)
    sendRecv(c, call, &token, 1, (r + d) % n, &sink, 1, (r - d + n) % n, kBarrier);
}

void hierAllreduce(Communicator& c, Call& call) {
  const int n = c.size();
  int g = call.desc.groupSize > 0 ? call.desc.groupSize : c.defaultGroupSize();
  g = std::clamp(g, 1, n);
  auto& h = c.hierGroups(g, call);
  Options o;
  o.op = call.desc.op == ReduceOp::Avg ? ReduceOp::Sum : call.desc.op;
  o.timeout = comm::detail::remaining(call);
  o.tag = call.desc.tag;
  const size_t count = call.desc.count;
  const DType dt = call.desc.dtype;
  // 1. reduce inside the group to its first rank; 2. allreduce among the group
  // leaders; 3. broadcast back inside the group.
  h.group->reduce(call.in, call.out, count, dt, o);
  if (h.leaders) {
    o.timeout = comm::detail::remaining(call);
    h.leaders->allreduce(call.out, call.out, count, dt, o);
  }
  o.timeout = comm::detail::remaining(call);
  o.root = 0;
  h.group->broadcast(call.out, count, dt, o);
  if (call.desc.op == ReduceOp::Avg) comm::detail::scaleForAvg(call.out, count, dt, n);
}

}  // namespace dtrain::comm::algorithms
