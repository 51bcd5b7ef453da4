#include "tensor/cpu/SmallGemm.h"

#include "tensor/cpu/Lanes.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12's AVX-512 headers build lane shuffles and casts from _mm*_undefined_*
// values and then warn about them (-Wuninitialized, GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace dtrain::kernels::detail {

#if defined(__AVX512F__)
namespace {

inline __mmask16 tailMask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// Horizontal sum (GCC 12's _mm512_reduce_add_ps warns about an uninitialized
// temporary inside the header, so fold the lanes by hand).
inline float hsum(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
  __m128 x = _mm512_castps512_ps128(v);
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// One MR x (NV vectors of 16) block of C, accumulators in registers for the
// whole K loop (MR*NV <= 24 of the 32 zmm registers). Only the last vector of a
// row may be partial (mask `last`).
// K = segments * segLen: element k = s*segLen + t of row i of A is read at
// aRows[i][s*segStride + t] (one segment of K for an ordinary matrix).
template <int MR, int NV, bool kOffsets>
void tileBroadcast(int64_t segments, int64_t segLen, int64_t segStride, const float* const* aRows,
                   const float* B, int64_t ldb, const int64_t* bRowOffsets, float* C, int64_t ldc,
                   const float* rowInit, bool accumulate, __mmask16 last) {
  const float* A[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) A[i] = aRows[i];
  __m512 c[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 init = rowInit ? _mm512_set1_ps(rowInit[i]) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      const __mmask16 m = j == NV - 1 ? last : __mmask16(0xFFFF);
      c[i][j] = accumulate ? _mm512_maskz_loadu_ps(m, C + i * ldc + 16 * j) : init;
    }
  }
  for (int64_t sg = 0, k = 0; sg < segments; ++sg) {
    for (int64_t t = 0; t < segLen; ++t, ++k) {
      const float* b = kOffsets ? B + bRowOffsets[k] : B + k * ldb;
      __m512 bv[NV];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j)
        bv[j] = j == NV - 1 ? _mm512_maskz_loadu_ps(last, b + 16 * j) : _mm512_loadu_ps(b + 16 * j);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 a = _mm512_set1_ps(A[i][t]);
#pragma GCC unroll 8
        for (int j = 0; j < NV; ++j) c[i][j] = _mm512_fmadd_ps(a, bv[j], c[i][j]);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) A[i] += segStride;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      if (j == NV - 1)
        _mm512_mask_storeu_ps(C + i * ldc + 16 * j, last, c[i][j]);
      else
        _mm512_storeu_ps(C + i * ldc + 16 * j, c[i][j]);
    }
}

// One MR x NR block of C as dot products over L, vectorized along L; the
// partial lane sums are folded once at the end.
template <int MR, int NR, bool kOffsets>
void tileDot(int64_t L, const float* A, int64_t lda, const float* B, int64_t ldb,
             const int64_t* bRowOffsets, float* C, int64_t ldc, bool accumulate) {
  __m512 c[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) c[i][j] = _mm512_setzero_ps();
  const float* brow[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) brow[j] = kOffsets ? B + bRowOffsets[j] : B + j * ldb;
  auto step = [&](int64_t l, __mmask16 m) {
    __m512 a[MR], b[NR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) a[i] = _mm512_maskz_loadu_ps(m, A + i * lda + l);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) b[j] = _mm512_maskz_loadu_ps(m, brow[j] + l);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) c[i][j] = _mm512_fmadd_ps(a[i], b[j], c[i][j]);
  };
  int64_t l = 0;
  for (; l + 16 <= L; l += 16) step(l, __mmask16(0xFFFF));
  if (l < L) step(l, tailMask(L - l));
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const float v = hsum(c[i][j]);
      C[i * ldc + j] = accumulate ? C[i * ldc + j] + v : v;
    }
}

using BroadcastFn = void (*)(int64_t, int64_t, int64_t, const float* const*, const float*, int64_t,
                             const int64_t*, float*, int64_t, const float*, bool, __mmask16);
using DotFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, const int64_t*,
                       float*, int64_t, bool);

constexpr int kBroadcastMR = 8, kBroadcastNV = 4;
// Rows per tile for a panel of nv vectors: at most 24 accumulators; 8 rows (8
// broadcasts per 2-3 vector loads) where that fits. One-vector panels run
// best at 6 rows.
constexpr int rowsPerTile(int nv) { return nv == 2 || nv == 3 ? 8 : 6; }

constexpr int kDotMax = 6;

template <bool kOffsets, int... Is>
constexpr auto broadcastTable(std::integer_sequence<int, Is...>) {
  return std::array<BroadcastFn, sizeof...(Is)>{
      &tileBroadcast<Is / kBroadcastNV + 1, Is % kBroadcastNV + 1, kOffsets>...};
}
template <bool kOffsets, int... Is>
constexpr auto dotTable(std::integer_sequence<int, Is...>) {
  return std::array<DotFn, sizeof...(Is)>{
      &tileDot<Is / kDotMax + 1, Is % kDotMax + 1, kOffsets>...};
}
constexpr auto kBroadcast =
    broadcastTable<false>(std::make_integer_sequence<int, kBroadcastMR * kBroadcastNV>{});
constexpr auto kBroadcastOffsets =
    broadcastTable<true>(std::make_integer_sequence<int, kBroadcastMR * kBroadcastNV>{});
constexpr auto kDot = dotTable<false>(std::make_integer_sequence<int, kDotMax * kDotMax>{});
constexpr auto kDotOffsets = dotTable<true>(std::make_integer_sequence<int, kDotMax * kDotMax>{});

// Column panels outer, row blocks inner: the K x panel block of B stays in L1
// while every block of rows of A streams over it. Vectors are spread evenly over
// the panels (9 vectors: 3+3+3, not 4+4+1): a one-vector panel does 6 FMAs per
// 7 loads.
void broadcastDriver(int64_t M, int64_t N, int64_t segments, int64_t segLen, int64_t segStride,
                     const float* A, int64_t lda, const int64_t* aRowOffsets, const float* B,
                     int64_t ldb, const int64_t* bRowOffsets, float* C, int64_t ldc,
                     const float* rowInit, bool accumulate) {
  const auto& table = bRowOffsets ? kBroadcastOffsets : kBroadcast;
  const float* rows[kBroadcastMR];
  const int64_t vectors = (N + 15) / 16, panels = (vectors + kBroadcastNV - 1) / kBroadcastNV;
  for (int64_t p = 0, v0 = 0; p < panels; ++p) {
    const int64_t v1 = (p + 1) * vectors / panels, n0 = 16 * v0;
    const int nv = static_cast<int>(v1 - v0);
    const __mmask16 last = tailMask(std::min<int64_t>(N, 16 * v1) - 16 * (v1 - 1));
    v0 = v1;
    // Row blocks of even height (16 rows: 8+8, not 6+6+4).
    const int64_t blocks = (M + rowsPerTile(nv) - 1) / rowsPerTile(nv);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t m0 = b * M / blocks;
      const int mr = static_cast<int>((b + 1) * M / blocks - m0);
      for (int i = 0; i < mr; ++i)
        rows[i] = aRowOffsets ? A + aRowOffsets[m0 + i] : A + (m0 + i) * lda;
      table[(mr - 1) * kBroadcastNV + nv - 1](segments, segLen, segStride, rows, B + n0, ldb,
                                              bRowOffsets, C + m0 * ldc + n0, ldc,
                                              rowInit ? rowInit + m0 : nullptr, accumulate, last);
    }
  }
}

}  // namespace

void gemmBroadcastA(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const int64_t* aRowOffsets, const float* B, int64_t ldb,
                    const int64_t* bRowOffsets, float* C, int64_t ldc, const float* rowInit,
                    bool accumulate) {
  if (M <= 0 || N <= 0) return;
  broadcastDriver(M, N, 1, K, 0, A, lda, aRowOffsets, B, ldb, bRowOffsets, C, ldc, rowInit,
                  accumulate);
}

void gemmWindowA(int64_t M, int64_t N, int64_t segments, int64_t segLen, int64_t segStride,
                 const float* A, const int64_t* aRowOffsets, const float* B, int64_t ldb, float* C,
                 int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  broadcastDriver(M, N, segments, segLen, segStride, A, 0, aRowOffsets, B, ldb, nullptr, C, ldc,
                  nullptr, true);
}

void gemmDotRows(int64_t M, int64_t N, int64_t L, const float* A, int64_t lda, const float* B,
                 int64_t ldb, const int64_t* bRowOffsets, float* C, int64_t ldc, bool accumulate) {
  const auto& table = bRowOffsets ? kDotOffsets : kDot;
  // 4x6 or 6x4 tiles (24 accumulators, 10 loads per 24 FMAs), whichever leaves
  // the smaller remainder of rows; remainders use the narrower instantiations.
  const int mrMain = M % 4 != 0 && M % 6 == 0 ? 6 : 4;
  const int nrMain = mrMain == 6 ? 4 : 6;
  for (int64_t m0 = 0; m0 < M; m0 += mrMain) {
    const int mr = static_cast<int>(std::min<int64_t>(M - m0, mrMain));
    for (int64_t n0 = 0; n0 < N; n0 += nrMain) {
      const int nr = static_cast<int>(std::min<int64_t>(N - n0, nrMain));
      table[(mr - 1) * kDotMax + nr - 1](L, A + m0 * lda, lda, bRowOffsets ? B : B + n0 * ldb, ldb,
                                         bRowOffsets ? bRowOffsets + n0 : nullptr,
                                         C + m0 * ldc + n0, ldc, accumulate);
    }
  }
}

#else  // portable fallback: plain loops GCC vectorizes for the target it has

namespace {

// 8-float vectors (one AVX2 register), GCC's vector extension: portable code
// that keeps a block of C in registers for the whole K loop, which the plain
// loops (C reloaded and stored for every k) do not.
using Vec8 = float __attribute__((vector_size(32)));
inline Vec8 load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, Vec8 v) { std::memcpy(p, &v, sizeof v); }

// Rows [i0, i0 + MR) x columns [j, j + 16) of C, accumulators in registers.
template <int MR>
void broadcastBlock(int64_t i0, int64_t j, int64_t K, const float* const* a, const float* B,
                    int64_t ldb, const int64_t* bRowOffsets, float* C, int64_t ldc,
                    const float* rowInit, bool accumulate) {
  Vec8 c[MR][2];
  for (int r = 0; r < MR; ++r) {
    float* row = C + (i0 + r) * ldc + j;
    if (accumulate) {
      c[r][0] = load8(row);
      c[r][1] = load8(row + 8);
    } else {
      const float v = rowInit ? rowInit[i0 + r] : 0.f;
      c[r][0] = c[r][1] = Vec8{} + v;
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    const float* b = (bRowOffsets ? B + bRowOffsets[k] : B + k * ldb) + j;
    const Vec8 b0 = load8(b), b1 = load8(b + 8);
    for (int r = 0; r < MR; ++r) {
      const float av = a[r][k];
      c[r][0] += av * b0;
      c[r][1] += av * b1;
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* row = C + (i0 + r) * ldc + j;
    store8(row, c[r][0]);
    store8(row + 8, c[r][1]);
  }
}

}  // namespace

void gemmBroadcastA(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const int64_t* aRowOffsets, const float* B, int64_t ldb,
                    const int64_t* bRowOffsets, float* C, int64_t ldc, const float* rowInit,
                    bool accumulate) {
  constexpr int kMR = 4;
  const int64_t fullCols = N / 16 * 16;
  for (int64_t i0 = 0; i0 < M; i0 += kMR) {
    const int mr = static_cast<int>(std::min<int64_t>(kMR, M - i0));
    const float* a[kMR];
    for (int r = 0; r < mr; ++r) a[r] = aRowOffsets ? A + aRowOffsets[i0 + r] : A + (i0 + r) * lda;
    for (int64_t j = 0; j < fullCols; j += 16) {
      switch (mr) {
        case 4: broadcastBlock<4>(i0, j, K, a, B, ldb, bRowOffsets, C, ldc, rowInit, accumulate); break;
        case 3: broadcastBlock<3>(i0, j, K, a, B, ldb, bRowOffsets, C, ldc, rowInit, accumulate); break;
        case 2: broadcastBlock<2>(i0, j, K, a, B, ldb, bRowOffsets, C, ldc, rowInit, accumulate); break;
        default: broadcastBlock<1>(i0, j, K, a, B, ldb, bRowOffsets, C, ldc, rowInit, accumulate);
      }
    }
  }
  if (fullCols == N) return;
  // The last N % 16 columns: plain loops.
  for (int64_t i = 0; i < M; ++i) {
    const float* a = aRowOffsets ? A + aRowOffsets[i] : A + i * lda;
    float* __restrict c = C + i * ldc;
    if (!accumulate) {
      const float v = rowInit ? rowInit[i] : 0.f;
      for (int64_t j = fullCols; j < N; ++j) c[j] = v;
    }
    for (int64_t k = 0; k < K; ++k) {
      const float* __restrict b = bRowOffsets ? B + bRowOffsets[k] : B + k * ldb;
      for (int64_t j = fullCols; j < N; ++j) c[j] += a[k] * b[j];
    }
  }
}

void gemmWindowA(int64_t M, int64_t N, int64_t segments, int64_t segLen, int64_t segStride,
                 const float* A, const int64_t* aRowOffsets, const float* B, int64_t ldb, float* C,
                 int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* __restrict c = C + i * ldc;
    for (int64_t sg = 0; sg < segments; ++sg)
      for (int64_t t = 0; t < segLen; ++t) {
        const float a = A[aRowOffsets[i] + sg * segStride + t];
        const float* __restrict b = B + (sg * segLen + t) * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
  }
}

void gemmDotRows(int64_t M, int64_t N, int64_t L, const float* A, int64_t lda, const float* B,
                 int64_t ldb, const int64_t* bRowOffsets, float* C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const float* a = A + i * lda;
      const float* b = bRowOffsets ? B + bRowOffsets[j] : B + j * ldb;
      // Lane-split partial sums: a plain running sum is not vectorized
      // without -ffast-math, which made this loop scalar on AVX2 machines.
      const float s = laneDot(a, b, L);
      C[i * ldc + j] = accumulate ? C[i * ldc + j] + s : s;
    }
}

#endif

}  // namespace dtrain::kernels::detail
