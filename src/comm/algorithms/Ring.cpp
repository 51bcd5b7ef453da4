// Ring algorithms: allreduce = reduce-scatter + allgather over a ring, 2(n-1)
// steps, each moving 1/n of the buffer; segments are cut into chunks with a
// double-buffered receive so that reducing chunk j overlaps receiving chunk j+1.
#include <algorithm>
#include <cstring>

#include "comm/algorithms/Algorithms.h"
#include "comm/algorithms/P2P.h"
#include "comm/detail/ReduceKernels.h"

namespace dtrain::comm::algorithms {

using namespace detail;

namespace {

constexpr size_t kChunkBytes = 256 << 10;

size_t chunksOf(size_t len, size_t chunk) { return (len + chunk - 1) / chunk; }

// One reduce-scatter step: send [sOff, sOff+sLen) of src to next; receive the
// peer's [rOff, rOff+rLen) and store acc[r] = base[r] (op) received.
void rsStep(Communicator& c, const Call& call, const char* src, size_t sLen, const char* base,
            char* acc, size_t rLen, char* tmp, size_t chunk, int next, int prev, int tag) {
  const size_t es = call.elemSize();
  std::vector<WorkPtr> sends;
  size_t sN = chunksOf(sLen, chunk), rN = chunksOf(rLen, chunk);
  WorkPtr recvs[2];
  auto post = [&](size_t j) {
    size_t lo = j * chunk, len = std::min(chunk, rLen - lo);
    recvs[j % 2] = postRecv(c, tmp + (j % 2) * chunk * es, len * es, prev, tag);
  };
  for (size_t j = 0; j < std::min<size_t>(rN, 2); ++j) post(j);
  for (size_t j = 0; j < sN; ++j) {
    size_t lo = j * chunk, len = std::min(chunk, sLen - lo);
    sends.push_back(postSend(c, src + lo * es, len * es, next, tag));
  }
  for (size_t j = 0; j < rN; ++j) {
    finish(recvs[j % 2], call);
    size_t lo = j * chunk, len = std::min(chunk, rLen - lo);
    comm::detail::reduce2(acc + lo * es, base + lo * es, tmp + (j % 2) * chunk * es, len,
                          call.desc.dtype, call.desc.op);
    if (j + 2 < rN) post(j + 2);
  }
  finishAll(sends, call);
}

// One allgather step: send a block to next, receive a block from prev (no reduction).
void agStep(Communicator& c, const Call& call, const char* s, size_t sBytes, char* r,
            size_t rBytes, int next, int prev, int tag) {
  std::vector<WorkPtr> ws;
  if (rBytes) ws.push_back(postRecv(c, r, rBytes, prev, tag));
  if (sBytes) ws.push_back(postSend(c, s, sBytes, next, tag));
  finishAll(ws, call);
}

}  // namespace

void ringAllreduce(Communicator& c, Call& call) {
  const int n = c.size(), r = c.rank();
  const size_t count = call.desc.count, es = call.elemSize();
  const char* in = static_cast<const char*>(call.in);
  char* out = static_cast<char*>(call.out);
  if (n == 1 || count == 0) {
    if (in != out && count) std::memcpy(out, in, count * es);
    return;
  }
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t chunk = std::max<size_t>(1, kChunkBytes / es);
  char* tmp = c.scratch(0, 2 * chunk * es);
  auto seg = [&](int i) { return blockStart(count, n, ((i % n) + n) % n); };
  auto segLen = [&](int i) {
    int k = ((i % n) + n) % n;
    return blockStart(count, n, k + 1) - blockStart(count, n, k);
  };
  // Reduce-scatter: step s sends segment r-s (from `in` at step 0, afterwards the
  // partial sum reduced at the previous step) and reduces segment r-s-1.
  for (int s = 0; s < n - 1; ++s) {
    int sSeg = r - s, rSeg = r - s - 1;
    const char* src = (s == 0 ? in : out) + seg(sSeg) * es;
    rsStep(c, call, src, segLen(sSeg), in + seg(rSeg) * es, out + seg(rSeg) * es, segLen(rSeg),
           tmp, chunk, next, prev, kRing);
  }
  // Rank r now owns the reduced segment r+1.
  if (call.desc.op == ReduceOp::Avg)
    comm::detail::scaleForAvg(out + seg(r + 1) * es, segLen(r + 1), call.desc.dtype, n);
  for (int s = 0; s < n - 1; ++s) {
    int sSeg = r + 1 - s, rSeg = r - s;
    agStep(c, call, out + seg(sSeg) * es, segLen(sSeg) * es, out + seg(rSeg) * es,
           segLen(rSeg) * es, next, prev, kRing);
  }
}

void ringAllgatherv(Communicator& c, Call& call) {
  const int n = c.size(), r = c.rank();
  const size_t es = call.elemSize();
  std::vector<size_t> off(n + 1, 0);
  for (int i = 0; i < n; ++i) off[i + 1] = off[i] + call.counts[i];
  char* out = static_cast<char*>(call.out);
  const char* in = static_cast<const char*>(call.in);
  if (in != out + off[r] * es && call.counts[r]) std::memcpy(out + off[r] * es, in, call.counts[r] * es);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    int sb = (r - s + n) % n, rb = (r - s - 1 + n) % n;
    agStep(c, call, out + off[sb] * es, call.counts[sb] * es, out + off[rb] * es,
           call.counts[rb] * es, next, prev, kAllgatherv);
  }
}

void ringReduceScatter(Communicator& c, Call& call) {
  const int n = c.size(), r = c.rank();
  const size_t count = call.desc.count, es = call.elemSize();
  const char* in = static_cast<const char*>(call.in);
  char* out = static_cast<char*>(call.out);
  if (count == 0) return;
  if (n == 1) {
    std::memcpy(out, in, count * es);
    return;
  }
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t chunk = std::max<size_t>(1, kChunkBytes / es);
  char* tmp = c.scratch(0, 2 * chunk * es);
  char* acc = c.scratch(1, 2 * count * es);
  auto blk = [&](int i) { return in + static_cast<size_t>(((i % n) + n) % n) * count * es; };
  // Step s sends block r-s-1 (raw at step 0, then the partial sum of the previous
  // step) and reduces block r-s-2; the last step reduces block r into out.
  for (int s = 0; s < n - 1; ++s) {
    const char* src = s == 0 ? blk(r - 1) : acc + ((s - 1) % 2) * count * es;
    char* dst = s == n - 2 ? out : acc + (s % 2) * count * es;
    rsStep(c, call, src, count, blk(r - s - 2), dst, count, tmp, chunk, next, prev, kReduceScatter);
  }
  if (call.desc.op == ReduceOp::Avg) comm::detail::scaleForAvg(out, count, call.desc.dtype, n);
}

}  // namespace dtrain::comm::algorithms
