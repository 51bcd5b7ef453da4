#include "tensor/cpu/Attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/Error.h"
#include "core/Scratch.h"
#include "tensor/cpu/Blas.h"
#include "tensor/cpu/FastMath.h"
#include "tensor/cpu/Lanes.h"
#include "tensor/cpu/Parallel.h"

namespace dtrain::kernels {
namespace {

// Query rows x keys per score tile: a 64 x 64 tile (16 KB) and its gradient
// stay in L1/L2 next to the q, k, v rows they come from, and 64-row products
// keep sgemm efficient for head sizes of 32-64.
constexpr int64_t kBlockQ = 64, kBlockK = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// p[c] = exp(p[c] - shift) for the `visible` first keys, 0 for the masked rest.
void expMasked(float* p, int64_t visible, int64_t n, float shift) {
  for (int64_t c = 0; c < visible; ++c) p[c] = detail::fastExp(p[c] - shift);
  for (int64_t c = visible; c < n; ++c) p[c] = 0.f;
}

// Keys of tile column range [j0, j0 + nj) visible to query row i (j <= i).
inline int64_t visibleKeys(int64_t i, int64_t j0, int64_t nj) {
  return std::clamp<int64_t>(i - j0 + 1, 0, nj);
}

struct Workspace {
  ScratchBuffer<float> s, dp, rowMax, rowSum, delta;
};
Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

// Pointers to the q, k, v (and output) rows of one (batch, head) pair.
struct Head {
  const float *q, *k, *v;
  int64_t ld;  // 3C: row stride of q, k, v
};
Head headOf(const float* qkv, int64_t b, int64_t h, int64_t T, int64_t C, int64_t D) {
  const float* q = qkv + b * T * 3 * C + h * D;
  return {q, q + C, q + 2 * C, 3 * C};
}

void checkShape(const char* op, int64_t B, int64_t T, int64_t C, int64_t H) {
  DTRAIN_CHECK(B >= 0 && T >= 0 && H > 0 && C > 0 && C % H == 0, op, ": bad shape B=", B, " T=", T,
               " C=", C, " heads=", H, " (C must be a positive multiple of the heads)");
}

void forwardHead(const Head& hd, float* o, int64_t ldo, float* lse, int64_t T, int64_t D,
                 float scale) {
  Workspace& ws = workspace();
  float* s = ws.s.grow(kBlockQ * kBlockK);
  float* m = ws.rowMax.grow(kBlockQ);
  float* l = ws.rowSum.grow(kBlockQ);
  for (int64_t i0 = 0; i0 < T; i0 += kBlockQ) {
    const int64_t mi = std::min(kBlockQ, T - i0), keys = i0 + mi;
    std::fill(m, m + mi, kNegInf);
    std::fill(l, l + mi, 0.f);
    for (int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
      const int64_t nj = std::min(kBlockK, keys - j0);
      gemm(false, true, mi, nj, D, scale, hd.q + i0 * hd.ld, hd.ld, hd.k + j0 * hd.ld, hd.ld, 0.f,
           s, nj);
      for (int64_t r = 0; r < mi; ++r) {
        float* sr = s + r * nj;
        const int64_t vis = visibleKeys(i0 + r, j0, nj);
        const float mNew = std::max(m[r], vis > 0 ? detail::laneMax(sr, vis) : kNegInf);
        expMasked(sr, vis, nj, mNew);
        const float rescale = j0 == 0 ? 0.f : detail::fastExp(m[r] - mNew);
        l[r] = l[r] * rescale + detail::laneSum(vis, [=](int64_t c) { return sr[c]; });
        m[r] = mNew;
        if (j0 > 0 && rescale != 1.f) {
          float* orow = o + (i0 + r) * ldo;
          for (int64_t d = 0; d < D; ++d) orow[d] *= rescale;
        }
      }
      gemm(false, false, mi, D, nj, 1.f, s, nj, hd.v + j0 * hd.ld, hd.ld, j0 == 0 ? 0.f : 1.f,
           o + i0 * ldo, ldo);
    }
    for (int64_t r = 0; r < mi; ++r) {
      float* orow = o + (i0 + r) * ldo;
      const float inv = 1.f / l[r];
      for (int64_t d = 0; d < D; ++d) orow[d] *= inv;
      if (lse) lse[i0 + r] = m[r] + std::log(l[r]);
    }
  }
}

// FlashAttention-2's backward: key blocks outer (dK, dV of a block are summed
// over the query blocks that see it), query blocks inner (dQ accumulates).
void backwardHead(const Head& hd, const float* o, const float* go, int64_t ldo, const float* lse,
                  float* gq, float* gk, float* gv, int64_t T, int64_t D, float scale) {
  Workspace& ws = workspace();
  float* p = ws.s.grow(kBlockQ * kBlockK);
  float* dp = ws.dp.grow(kBlockQ * kBlockK);
  float* delta = ws.delta.grow(T);
  // delta_i = sum_j P_ij dP_ij = go_i . o_i (rows of the softmax Jacobian).
  for (int64_t t = 0; t < T; ++t) {
    delta[t] = detail::laneDot(go + t * ldo, o + t * ldo, D);
    std::fill(gq + t * hd.ld, gq + t * hd.ld + D, 0.f);
  }
  for (int64_t j0 = 0; j0 < T; j0 += kBlockK) {
    const int64_t nj = std::min(kBlockK, T - j0);
    // The first query block that sees key j0 is the one holding row j0.
    for (int64_t i0 = j0 / kBlockQ * kBlockQ; i0 < T; i0 += kBlockQ) {
      const int64_t mi = std::min(kBlockQ, T - i0);
      const bool first = i0 <= j0;
      const float* qi = hd.q + i0 * hd.ld;
      const float* goi = go + i0 * ldo;
      gemm(false, true, mi, nj, D, scale, qi, hd.ld, hd.k + j0 * hd.ld, hd.ld, 0.f, p, nj);
      for (int64_t r = 0; r < mi; ++r)
        expMasked(p + r * nj, visibleKeys(i0 + r, j0, nj), nj, lse[i0 + r]);
      // dV_j += P^T dO_i;  dP = dO_i V_j^T
      gemm(true, false, nj, D, mi, 1.f, p, nj, goi, ldo, first ? 0.f : 1.f, gv + j0 * hd.ld, hd.ld);
      gemm(false, true, mi, nj, D, 1.f, goi, ldo, hd.v + j0 * hd.ld, hd.ld, 0.f, dp, nj);
      // dS = P * (dP - delta): the softmax backward, row by row (masked P are 0).
      for (int64_t r = 0; r < mi; ++r) {
        const float dr = delta[i0 + r];
        float* dsr = dp + r * nj;
        const float* pr = p + r * nj;
        for (int64_t c = 0; c < nj; ++c) dsr[c] = pr[c] * (dsr[c] - dr);
      }
      // dQ_i += scale dS K_j;  dK_j += scale dS^T Q_i
      gemm(false, false, mi, D, nj, scale, dp, nj, hd.k + j0 * hd.ld, hd.ld, 1.f, gq + i0 * hd.ld,
           hd.ld);
      gemm(true, false, nj, D, mi, scale, dp, nj, qi, hd.ld, first ? 0.f : 1.f, gk + j0 * hd.ld,
           hd.ld);
    }
  }
}

}  // namespace

void causalAttentionForward(const float* qkv, float* y, float* lse, int64_t B, int64_t T, int64_t C,
                            int64_t H) {
  checkShape("causalAttentionForward", B, T, C, H);
  const int64_t D = C / H;
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  detail::forRange(B * H, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      forwardHead(headOf(qkv, b, h, T, C, D), y + b * T * C + h * D, C, lse ? lse + bh * T : nullptr,
                  T, D, scale);
    }
  });
}

void causalAttentionBackward(const float* qkv, const float* y, const float* lse, const float* gy,
                             float* gqkv, int64_t B, int64_t T, int64_t C, int64_t H) {
  checkShape("causalAttentionBackward", B, T, C, H);
  const int64_t D = C / H;
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  detail::forRange(B * H, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const int64_t outOff = b * T * C + h * D;
      float* gq = gqkv + b * T * 3 * C + h * D;
      backwardHead(headOf(qkv, b, h, T, C, D), y + outOff, gy + outOff, C, lse + bh * T, gq,
                   gq + C, gq + 2 * C, T, D, scale);
    }
  });
}

}  // namespace dtrain::kernels
