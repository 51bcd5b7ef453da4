// Recursive halving/doubling allreduce (Rabenseifner): reduce-scatter by
// recursive halving, allgather by recursive doubling, log2(p) steps each. For a
// world size n that is not a power of two, the first 2*(n-p) ranks pair up
// (even ranks hand their vector to the odd neighbour and wait for the result).
#include <cstring>
#include <vector>

#include "comm/algorithms/Algorithms.h"
#include "comm/algorithms/P2P.h"
#include "comm/detail/ReduceKernels.h"

namespace dtrain::comm::algorithms {

using namespace detail;

void rhdAllreduce(Communicator& c, Call& call) {
  const int n = c.size(), r = c.rank();
  const size_t count = call.desc.count, es = call.elemSize();
  const DType dt = call.desc.dtype;
  char* out = static_cast<char*>(call.out);
  if (count && call.in != call.out) std::memcpy(out, call.in, count * es);
  if (n == 1 || count == 0) return;

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  int vrank;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      // Hand the vector to r+1 and wait for the final result.
      finish(postSend(c, out, count * es, r + 1, kRhd), call);
      finish(postRecv(c, out, count * es, r + 1, kRhd), call);
      return;
    }
    char* tmp = c.scratch(0, count * es);
    finish(postRecv(c, tmp, count * es, r - 1, kRhd), call);
    comm::detail::reduceInto(out, tmp, count, dt, call.desc.op);
    vrank = r / 2;
  } else {
    vrank = r - rem;
  }
  auto real = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };

  char* tmp = c.scratch(0, (count / 2 + 1) * es);
  std::vector<std::pair<size_t, size_t>> ranges;  // range before each halving step
  size_t lo = 0, hi = count;
  for (int dist = p / 2; dist >= 1; dist /= 2) {
    int partner = real(vrank ^ dist);
    size_t mid = lo + (hi - lo) / 2;
    bool lower = (vrank & dist) == 0;
    size_t kLo = lower ? lo : mid, kHi = lower ? mid : hi;  // kept half
    size_t sLo = lower ? mid : lo, sHi = lower ? hi : mid;  // half sent away
    sendRecv(c, call, out + sLo * es, (sHi - sLo) * es, partner, tmp, (kHi - kLo) * es, partner,
             kRhd);
    comm::detail::reduceInto(out + kLo * es, tmp, kHi - kLo, dt, call.desc.op);
    ranges.emplace_back(lo, hi);
    lo = kLo;
    hi = kHi;
  }
  if (call.desc.op == ReduceOp::Avg) comm::detail::scaleForAvg(out + lo * es, hi - lo, dt, n);
  for (int dist = 1; dist < p; dist *= 2) {
    int partner = real(vrank ^ dist);
    auto [pLo, pHi] = ranges.back();
    ranges.pop_back();
    // The other half of the parent range is the partner's.
    size_t oLo = lo == pLo ? hi : pLo, oHi = lo == pLo ? pHi : lo;
    sendRecv(c, call, out + lo * es, (hi - lo) * es, partner, out + oLo * es, (oHi - oLo) * es,
             partner, kRhd);
    lo = pLo;
    hi = pHi;
  }
  if (r < 2 * rem) finish(postSend(c, out, count * es, r - 1, kRhd), call);
}

}  // namespace dtrain::comm::algorithms
