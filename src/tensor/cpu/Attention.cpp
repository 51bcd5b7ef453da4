#include "tensor/cpu/Attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/Error.h"
#include "core/Scratch.h"
#include "tensor/cpu/Bf16.h"
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
  ScratchBuffer<float> s, dp, rowMax, rowSum, delta, row;
  ScratchBuffer<BFloat16> go, p, ds;  // bf16 copies (--precision bf16)
};
Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

// A matrix operand of a tile product: fp32 rows, and/or (bf16 products) bf16
// rows, each with its row stride.
struct Operand {
  const float* f = nullptr;
  int64_t ldf = 0;
  const BFloat16* h = nullptr;
  int64_t ldh = 0;
  Operand rows(int64_t r) const {
    return {f ? f + r * ldf : nullptr, ldf, h ? h + r * ldh : nullptr, ldh};
  }
};

// C = alpha op(A) op(B) + beta C: on the bf16 rows with fp32 accumulation when
// both have them (the products of --precision bf16, as linear layers'), else fp32.
void product(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const Operand& A,
             const Operand& B, float beta, float* C, int64_t ldc) {
  if (A.h && B.h)
    gemmBf16(ta, tb, M, N, K, alpha, A.h, A.ldh, B.h, B.ldh, beta, C, ldc);
  else
    gemm(ta, tb, M, N, K, alpha, A.f, A.ldf, B.f, B.ldf, beta, C, ldc);
}

// A score-sized fp32 tile as an operand (bf16: also converted into buf).
Operand tileOperand(const float* t, int64_t rows, int64_t cols, bool bf16,
                    ScratchBuffer<BFloat16>& buf) {
  Operand o{t, cols};
  if (bf16) {
    BFloat16* h = buf.grow(kBlockQ * kBlockK);
    toBf16(t, h, rows * cols);
    o.h = h;
    o.ldh = cols;
  }
  return o;
}

// The q, k, v rows of one (batch, head) pair in the packed [B, T, 3C] layout:
// from the fp32 qkv and/or its bf16 copy (either may be null).
struct HeadOperands {
  Operand q, k, v;
};
HeadOperands headOf(const float* qkv, const BFloat16* qkvh, int64_t b, int64_t h, int64_t T,
                    int64_t C, int64_t D) {
  const int64_t at = b * T * 3 * C + h * D, ld = 3 * C;
  HeadOperands x;
  Operand* parts[3] = {&x.q, &x.k, &x.v};
  for (int i = 0; i < 3; ++i)
    *parts[i] = {qkv ? qkv + at + i * C : nullptr, ld, qkvh ? qkvh + at + i * C : nullptr, ld};
  return x;
}

void checkShape(const char* op, int64_t B, int64_t T, int64_t C, int64_t H) {
  DTRAIN_CHECK(B >= 0 && T >= 0 && H > 0 && C > 0 && C % H == 0, op, ": bad shape B=", B, " T=", T,
               " C=", C, " heads=", H, " (C must be a positive multiple of the heads)");
}

void forwardHead(const HeadOperands& x, float* o, int64_t ldo, float* lse, int64_t T, int64_t D,
                 float scale) {
  Workspace& ws = workspace();
  const bool bf16 = x.q.h != nullptr;
  float* s = ws.s.grow(kBlockQ * kBlockK);
  float* m = ws.rowMax.grow(kBlockQ);
  float* l = ws.rowSum.grow(kBlockQ);
  for (int64_t i0 = 0; i0 < T; i0 += kBlockQ) {
    const int64_t mi = std::min(kBlockQ, T - i0), keys = i0 + mi;
    std::fill(m, m + mi, kNegInf);
    std::fill(l, l + mi, 0.f);
    for (int64_t j0 = 0; j0 < keys; j0 += kBlockK) {
      const int64_t nj = std::min(kBlockK, keys - j0);
      product(false, true, mi, nj, D, scale, x.q.rows(i0), x.k.rows(j0), 0.f, s, nj);
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
      product(false, false, mi, D, nj, 1.f, tileOperand(s, mi, nj, bf16, ws.p), x.v.rows(j0),
              j0 == 0 ? 0.f : 1.f, o + i0 * ldo, ldo);
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
// delta[t] = go_t . o_t (rows of the softmax Jacobian); gq, gk, gv have row
// stride ldg.
void backwardHead(const HeadOperands& x, const float* go, int64_t ldo, const float* delta,
                  const float* lse, float* gq, float* gk, float* gv, int64_t ldg, int64_t T,
                  int64_t D, float scale) {
  Workspace& ws = workspace();
  const bool bf16 = x.q.h != nullptr;
  float* p = ws.s.grow(kBlockQ * kBlockK);
  float* dp = ws.dp.grow(kBlockQ * kBlockK);
  Operand gO{go, ldo};
  if (bf16) {
    BFloat16* h = ws.go.grow(T * D);
    for (int64_t t = 0; t < T; ++t) toBf16(go + t * ldo, h + t * D, D);
    gO.h = h;
    gO.ldh = D;
  }
  for (int64_t t = 0; t < T; ++t) std::fill(gq + t * ldg, gq + t * ldg + D, 0.f);
  for (int64_t j0 = 0; j0 < T; j0 += kBlockK) {
    const int64_t nj = std::min(kBlockK, T - j0);
    // The first query block that sees key j0 is the one holding row j0.
    for (int64_t i0 = j0 / kBlockQ * kBlockQ; i0 < T; i0 += kBlockQ) {
      const int64_t mi = std::min(kBlockQ, T - i0);
      const bool first = i0 <= j0;
      const Operand qi = x.q.rows(i0), goi = gO.rows(i0);
      product(false, true, mi, nj, D, scale, qi, x.k.rows(j0), 0.f, p, nj);
      for (int64_t r = 0; r < mi; ++r)
        expMasked(p + r * nj, visibleKeys(i0 + r, j0, nj), nj, lse[i0 + r]);
      // dV_j += P^T dO_i;  dP = dO_i V_j^T
      product(true, false, nj, D, mi, 1.f, tileOperand(p, mi, nj, bf16, ws.p), goi,
              first ? 0.f : 1.f, gv + j0 * ldg, ldg);
      product(false, true, mi, nj, D, 1.f, goi, x.v.rows(j0), 0.f, dp, nj);
      // dS = P * (dP - delta): the softmax backward, row by row (masked P are 0).
      for (int64_t r = 0; r < mi; ++r) {
        const float dr = delta[i0 + r];
        float* dsr = dp + r * nj;
        const float* pr = p + r * nj;
        for (int64_t c = 0; c < nj; ++c) dsr[c] = pr[c] * (dsr[c] - dr);
      }
      // dQ_i += scale dS K_j;  dK_j += scale dS^T Q_i
      const Operand ds = tileOperand(dp, mi, nj, bf16, ws.ds);
      product(false, false, mi, D, nj, scale, ds, x.k.rows(j0), 1.f, gq + i0 * ldg, ldg);
      product(true, false, nj, D, mi, scale, ds, qi, first ? 0.f : 1.f, gk + j0 * ldg, ldg);
    }
  }
}

// The backward over every (batch, head) pair; outRow(b, h, t) gives head h's
// output row t of batch b as fp32 (for delta).
template <typename OutRow>
void backwardAll(const float* qkv, const BFloat16* qkvh, OutRow outRow, const float* lse,
                 const float* gy, float* gqkv, int64_t B, int64_t T, int64_t C, int64_t H) {
  const int64_t D = C / H;
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  detail::forRange(B * H, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* go = gy + b * T * C + h * D;
      float* delta = workspace().delta.grow(T);
      for (int64_t t = 0; t < T; ++t) delta[t] = detail::laneDot(go + t * C, outRow(b, h, t), D);
      float* gq = gqkv + b * T * 3 * C + h * D;
      backwardHead(headOf(qkv, qkvh, b, h, T, C, D), go, C, delta, lse + bh * T, gq, gq + C,
                   gq + 2 * C, 3 * C, T, D, scale);
    }
  });
}

}  // namespace

void causalAttentionForward(const float* qkv, float* y, float* lse, int64_t B, int64_t T, int64_t C,
                            int64_t H, const BFloat16* qkvBf16) {
  checkShape("causalAttentionForward", B, T, C, H);
  const int64_t D = C / H;
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  detail::forRange(B * H, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      // With a bf16 copy the products read it alone (fp32 rows are not needed).
      forwardHead(headOf(qkvBf16 ? nullptr : qkv, qkvBf16, b, h, T, C, D), y + b * T * C + h * D,
                  C, lse ? lse + bh * T : nullptr, T, D, scale);
    }
  });
}

void causalAttentionBackward(const float* qkv, const float* y, const float* lse, const float* gy,
                             float* gqkv, int64_t B, int64_t T, int64_t C, int64_t H) {
  checkShape("causalAttentionBackward", B, T, C, H);
  const int64_t D = C / H;
  backwardAll(qkv, nullptr, [&](int64_t b, int64_t h, int64_t t) { return y + (b * T + t) * C + h * D; },
              lse, gy, gqkv, B, T, C, H);
}

void causalAttentionBackwardBf16(const BFloat16* qkv, const BFloat16* y, const float* lse,
                                 const float* gy, float* gqkv, int64_t B, int64_t T, int64_t C,
                                 int64_t H) {
  checkShape("causalAttentionBackwardBf16", B, T, C, H);
  const int64_t D = C / H;
  backwardAll(nullptr, qkv,
              [&](int64_t b, int64_t h, int64_t t) {
                float* row = workspace().row.grow(D);
                fromBf16(y + (b * T + t) * C + h * D, row, D);
                return static_cast<const float*>(row);
              },
              lse, gy, gqkv, B, T, C, H);
}

}  // namespace dtrain::kernels
