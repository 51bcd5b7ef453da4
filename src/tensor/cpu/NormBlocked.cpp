// BatchNorm's kernels (Norm.h) on channel-blocked activations: each pixel's 16
// channels are one vector, so every loop runs over whole vectors with the
// per-channel constants held in registers, with no per-row remainder.
#include <algorithm>
#include <cstring>

#include "tensor/cpu/Blocked.h"
#include "tensor/cpu/Norm.h"
#include "tensor/cpu/Parallel.h"

namespace dtrain::kernels {
namespace {

constexpr int64_t kB = kChannelBlock;
// Independent partial sums per lane (pixels s, s+1, ...): hides the add latency.
constexpr int64_t kChains = 4;

// Channel blocks per part: a part streams at least kElementwiseGrain floats.
int64_t blockGrain(int64_t N, int64_t S) {
  return std::max<int64_t>(1, detail::kElementwiseGrain / std::max<int64_t>(1, N * S * kB));
}

// Runs row(offset, cb) for every (n, channel block) row of S*16 floats,
// parallel over channel blocks (each part owns its channels' sums), n outer so
// memory is walked in order.
template <typename Row>
void forRows(int64_t N, int64_t C, int64_t S, Row&& row) {
  const int64_t CB = C / kB;
  detail::forRange(CB, blockGrain(N, S), [&](int64_t lo, int64_t hi) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t cb = lo; cb < hi; ++cb) row((n * CB + cb) * S * kB, cb);
  });
}

// One pixel's 16 channels (GCC's vector extension: a register on AVX-512,
// and the sums' accumulators stay in registers, which arrays of floats did not).
using Vec = float __attribute__((vector_size(kB * sizeof(float))));
inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

struct Pair {
  Vec a, b;
};

// Two per-lane sums over a row's S pixels, from term(offset of a pixel) ->
// (a, b), added into the row's channels' doubles.
template <typename Term>
void sumRow(int64_t S, int64_t cb, double* sumA, double* sumB, Term&& term) {
  Vec a[kChains] = {}, b[kChains] = {};
  int64_t s = 0;
  for (; s + kChains <= S; s += kChains)
    for (int64_t k = 0; k < kChains; ++k) {
      const Pair t = term((s + k) * kB);
      a[k] += t.a;
      b[k] += t.b;
    }
  for (; s < S; ++s) {
    const Pair t = term(s * kB);
    a[0] += t.a;
    b[0] += t.b;
  }
  for (int64_t k = 1; k < kChains; ++k) a[0] += a[k], b[0] += b[k];
  for (int64_t l = 0; l < kB; ++l) {
    sumA[cb * kB + l] += a[0][l];
    sumB[cb * kB + l] += b[0][l];
  }
}

template <bool kResidual, bool kRelu>
void applyBlocked(const float* x, const float* scale, const float* shift, const float* residual,
                  float* y, int64_t N, int64_t C, int64_t S) {
  forRows(N, C, S, [&](int64_t o, int64_t cb) {
    const float* __restrict xp = x + o;
    const float* __restrict rp = kResidual ? residual + o : nullptr;
    float* __restrict yp = y + o;
    const float* __restrict a = scale + cb * kB;
    const float* __restrict b = shift + cb * kB;
    for (int64_t s = 0; s < S; ++s)
      for (int64_t l = 0; l < kB; ++l) {
        const int64_t i = s * kB + l;
        float v = xp[i] * a[l] + b[l];
        if constexpr (kResidual) v += rp[i];
        if constexpr (kRelu) v = v > 0.f ? v : 0.f;
        yp[i] = v;
      }
  });
}

}  // namespace

void batchNormSumsBlocked(const float* x, const float* pivot, double* sum, double* sumSq, int64_t N,
                          int64_t C, int64_t S) {
  std::fill(sum, sum + C, 0.0);
  std::fill(sumSq, sumSq + C, 0.0);
  forRows(N, C, S, [&](int64_t o, int64_t cb) {
    const float* __restrict p = x + o;
    const float* __restrict k = pivot + cb * kB;
    const Vec kv = load(k);
    sumRow(S, cb, sum, sumSq, [&](int64_t i) {
      const Vec d = load(p + i) - kv;
      return Pair{d, d * d};
    });
  });
}

void batchNormApplyBlocked(const float* x, const float* scale, const float* shift,
                           const float* residual, bool relu, float* y, int64_t N, int64_t C,
                           int64_t S) {
  if (residual) {
    if (relu)
      applyBlocked<true, true>(x, scale, shift, residual, y, N, C, S);
    else
      applyBlocked<true, false>(x, scale, shift, residual, y, N, C, S);
  } else {
    if (relu)
      applyBlocked<false, true>(x, scale, shift, residual, y, N, C, S);
    else
      applyBlocked<false, false>(x, scale, shift, residual, y, N, C, S);
  }
}

void batchNormBackwardSumsBlocked(const float* x, const float* y, const float* gy,
                                  const float* mean, float* gMasked, double* sumG, double* sumGX,
                                  int64_t N, int64_t C, int64_t S) {
  std::fill(sumG, sumG + C, 0.0);
  std::fill(sumGX, sumGX + C, 0.0);
  forRows(N, C, S, [&](int64_t o, int64_t cb) {
    const float* __restrict xp = x + o;
    const float* __restrict gp = gy + o;
    const float* __restrict m = mean + cb * kB;
    const Vec mv = load(m), zero = {};
    if (y) {  // through the ReLU: the gradient where the output was positive
      const float* __restrict yp = y + o;
      float* __restrict mp = gMasked + o;
      sumRow(S, cb, sumG, sumGX, [&](int64_t i) {
        const Vec g = load(yp + i) > zero ? load(gp + i) : zero;
        store(mp + i, g);
        return Pair{g, g * (load(xp + i) - mv)};
      });
    } else {
      sumRow(S, cb, sumG, sumGX, [&](int64_t i) {
        const Vec g = load(gp + i);
        return Pair{g, g * (load(xp + i) - mv)};
      });
    }
  });
}

void batchNormBackwardApplyBlocked(const float* x, const float* g, const float* mean,
                                   const float* k, const float* meanG, const float* q, float* gx,
                                   int64_t N, int64_t C, int64_t S) {
  forRows(N, C, S, [&](int64_t o, int64_t cb) {
    const float* __restrict xp = x + o;
    const float* __restrict gp = g + o;
    float* __restrict op = gx + o;
    const float* __restrict kc = k + cb * kB;
    const float* __restrict mg = meanG + cb * kB;
    const float* __restrict m = mean + cb * kB;
    const float* __restrict qc = q + cb * kB;
    for (int64_t s = 0; s < S; ++s)
      for (int64_t l = 0; l < kB; ++l) {
        const int64_t i = s * kB + l;
        op[i] = kc[l] * (gp[i] - mg[l] - (xp[i] - m[l]) * qc[l]);
      }
  });
}

}  // namespace dtrain::kernels
