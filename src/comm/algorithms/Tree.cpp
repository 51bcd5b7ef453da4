// Binomial trees (as in MPICH): reduce to a root and broadcast from it in
// ceil(log2 n) rounds. Best for small messages, where latency dominates.
#include <cstring>

#include "comm/algorithms/Algorithms.h"
#include "comm/algorithms/P2P.h"
#include "comm/detail/ReduceKernels.h"

namespace dtrain::comm::algorithms {

using namespace detail;

namespace {

// acc on `root` = op over ranks of in. acc must hold count elements on every rank.
void binomialReduce(Communicator& c, const Call& call, const void* in, char* acc, int root) {
  const int n = c.size();
  const size_t count = call.desc.count, es = call.elemSize();
  if (count && in != acc) std::memcpy(acc, in, count * es);
  const int v = (c.rank() - root + n) % n;
  char* tmp = nullptr;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      finish(postSend(c, acc, count * es, ((v - mask) + root) % n, kTreeReduce), call);
      return;
    }
    if (v + mask < n) {
      if (!tmp) tmp = c.scratch(0, count * es);
      finish(postRecv(c, tmp, count * es, ((v + mask) + root) % n, kTreeReduce), call);
      comm::detail::reduceInto(acc, tmp, count, call.desc.dtype, call.desc.op);
    }
  }
}

void binomialBroadcast(Communicator& c, const Call& call, void* data, int root) {
  const int n = c.size();
  const size_t bytes = call.desc.count * call.elemSize();
  const int v = (c.rank() - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      finish(postRecv(c, data, bytes, ((v - mask) + root) % n, kTreeBcast), call);
      break;
    }
    mask <<= 1;
  }
  std::vector<WorkPtr> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < n) sends.push_back(postSend(c, data, bytes, ((v + mask) + root) % n, kTreeBcast));
  finishAll(sends, call);
}

}  // namespace

void treeAllreduce(Communicator& c, Call& call) {
  char* out = static_cast<char*>(call.out);
  binomialReduce(c, call, call.in, out, 0);
  if (c.rank() == 0 && call.desc.op == ReduceOp::Avg)
    comm::detail::scaleForAvg(out, call.desc.count, call.desc.dtype, c.size());
  binomialBroadcast(c, call, out, 0);
}

void treeReduce(Communicator& c, Call& call) {
  const int root = call.desc.root;
  const size_t bytes = call.desc.count * call.elemSize();
  // Non-roots may pass out == nullptr: accumulate in scratch.
  char* acc = c.rank() == root ? static_cast<char*>(call.out) : c.scratch(1, bytes);
  binomialReduce(c, call, call.in, acc, root);
  if (c.rank() == root && call.desc.op == ReduceOp::Avg)
    comm::detail::scaleForAvg(acc, call.desc.count, call.desc.dtype, c.size());
}

void treeBroadcast(Communicator& c, Call& call) { binomialBroadcast(c, call, call.out, call.desc.root); }

}  // namespace dtrain::comm::algorithms
