#include "tensor/cpu/Pool.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "tensor/cpu/Parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace dtrain::kernels {
namespace {

// Planes (n, c) are independent; split them across threads when there is work
// enough for it.
template <typename F>
void forPlanes(const PoolShape& s, int64_t planeWork, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(planeWork, 1));
  detail::forRange(s.N * s.C, grain, fn);
}

// Calls fn(o, hb, he, wb, we) for every output o = oh*OW + ow of one plane, in
// output order, with its input window [hb, he) x [wb, we) clamped to the image
// (padding contributes nothing).
template <typename F>
inline void forEachWindow(const PoolShape& s, F&& fn) {
  const int64_t OH = s.outH(), OW = s.outW();
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = oh * s.strideH - s.padH;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min(h0 + s.KH, s.H);
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t w0 = ow * s.strideW - s.padW;
      fn(oh * OW + ow, hb, he, std::max<int64_t>(w0, 0), std::min(w0 + s.KW, s.W));
    }
  }
}

// The LeNet/VGG case: 2x2 windows, stride 2, no padding. Rows are read in pairs
// and each output compares four values; the first maximum in window order
// (row-major, as torch) wins, and a NaN is a maximum that nothing replaces.
inline void pick(float v, int32_t vi, float& m, int32_t& i) {
  const bool take = (v > m || v != v) && m == m;
  m = take ? v : m;
  i = take ? vi : i;
}

// One output row from input rows r0, r1 (base = flat index of r0[0]).
[[gnu::always_inline]] inline void maxPoolRow2x2(const float* r0, const float* r1, int64_t W,
                                                 int32_t base, int64_t OW, float* y, int32_t* a) {
  int64_t ow = 0;
#if defined(__AVX512F__)
  // 16 outputs per step: two 16-float loads per row, split into even and odd
  // columns by permutes, then masked compare-and-blend steps.
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 =
      _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
  for (; ow < OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow);
    const __mmask16 out = static_cast<__mmask16>((1u << n) - 1u);
    const __mmask16 lo = static_cast<__mmask16>(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1u);
    const __mmask16 hi = static_cast<__mmask16>(n > 8 ? (1u << (2 * n - 16)) - 1u : 0u);
    const float* p0 = r0 + 2 * ow;
    const float* p1 = r1 + 2 * ow;
    const __m512 a0 = _mm512_maskz_loadu_ps(lo, p0), a1 = _mm512_maskz_loadu_ps(hi, p0 + 16);
    const __m512 b0 = _mm512_maskz_loadu_ps(lo, p1), b1 = _mm512_maskz_loadu_ps(hi, p1 + 16);
    const __m512 v[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                         _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)};
    const __m512i first =
        _mm512_add_epi32(_mm512_set1_epi32(base + static_cast<int32_t>(2 * ow)), lane2);
    // "b replaces a" = b is greater with NaN on top: strictly, so the earlier
    // index wins ties. That choice is associative, so the four candidates are
    // reduced as a tree (two dependent steps instead of three).
    auto pickV = [](__m512 a, __m512i ia, __m512 b, __m512i ib, __m512i& idx) {
      const __mmask16 take =
          (_mm512_cmp_ps_mask(b, a, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q)) &
          _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q);
      idx = _mm512_mask_blend_epi32(take, ia, ib);
      return _mm512_mask_blend_ps(take, a, b);
    };
    const __m512i w32v = _mm512_set1_epi32(static_cast<int32_t>(W));
    const __m512i i1 = _mm512_add_epi32(first, _mm512_set1_epi32(1));
    const __m512i i2 = _mm512_add_epi32(first, w32v),
                  i3 = _mm512_add_epi32(i2, _mm512_set1_epi32(1));
    __m512i top, bottom, idx;
    const __m512 mTop = pickV(v[0], first, v[1], i1, top);
    const __m512 mBottom = pickV(v[2], i2, v[3], i3, bottom);
    const __m512 m = pickV(mTop, top, mBottom, bottom, idx);
    _mm512_mask_storeu_ps(y + ow, out, m);
    _mm512_mask_storeu_epi32(a + ow, out, idx);
  }
#endif
  for (; ow < OW; ++ow) {
    float m = r0[2 * ow];
    int32_t i = base + static_cast<int32_t>(2 * ow);
    pick(r0[2 * ow + 1], i + 1, m, i);
    pick(r1[2 * ow], base + static_cast<int32_t>(W + 2 * ow), m, i);
    pick(r1[2 * ow + 1], base + static_cast<int32_t>(W + 2 * ow + 1), m, i);
    y[ow] = m;
    a[ow] = i;
  }
}

void maxPool2x2(const PoolShape& s, const float* x, float* y, int32_t* argmax, int64_t lo,
                int64_t hi) {
  const int64_t H = s.H, W = s.W, OH = s.outH(), OW = s.outW();
  for (int64_t p = lo; p < hi; ++p)
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float* r0 = x + p * H * W + 2 * oh * W;
      maxPoolRow2x2(r0, r0 + W, W, static_cast<int32_t>(2 * oh * W), OW, y + (p * OH + oh) * OW,
                    argmax + (p * OH + oh) * OW);
    }
}

// Backward of maxPool2x2: every input belongs to at most one window, so each
// gx element is written once (the gradient or 0) instead of a memset followed
// by a scatter. The argmax comes from maxPool2x2, so it lies inside its window.
void maxPool2x2Backward(const PoolShape& s, const float* gy, const int32_t* argmax, float* gx,
                        int64_t lo, int64_t hi) {
  const int64_t H = s.H, W = s.W, OH = s.outH(), OW = s.outW();
  for (int64_t p = lo; p < hi; ++p) {
    float* gp = gx + p * H * W;
    const float* __restrict g = gy + p * OH * OW;
    const int32_t* __restrict a = argmax + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      float* __restrict r0 = gp + 2 * oh * W;
      float* __restrict r1 = r0 + W;
      const int32_t base = static_cast<int32_t>(2 * oh * W);
      int64_t ow = 0;
#if defined(__AVX512F__)
      // 16 outputs per step: each becomes "gradient or 0" in four positions,
      // interleaved back into even/odd columns of the two input rows.
      const __m512i lane2 = _mm512_slli_epi32(
          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
      const __m512i mixLo =
          _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const __m512i mixHi = _mm512_add_epi32(mixLo, _mm512_set1_epi32(8));
      const __m512i w0 = _mm512_set1_epi32(static_cast<int32_t>(W));
      const __m512i w1 = _mm512_set1_epi32(static_cast<int32_t>(W + 1));
      for (; ow < OW; ow += 16) {
        const int64_t n = std::min<int64_t>(16, OW - ow);
        const __mmask16 in = static_cast<__mmask16>((1u << n) - 1u);
        const __mmask16 lo2 = static_cast<__mmask16>(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1u);
        const __mmask16 hi2 = static_cast<__mmask16>(n > 8 ? (1u << (2 * n - 16)) - 1u : 0u);
        const __m512 v = _mm512_maskz_loadu_ps(in, g + oh * OW + ow);
        const __m512i rel = _mm512_sub_epi32(
            _mm512_maskz_loadu_epi32(in, a + oh * OW + ow),
            _mm512_add_epi32(_mm512_set1_epi32(base + static_cast<int32_t>(2 * ow)), lane2));
        const __m512i zero = _mm512_setzero_si512();
        const __m512 e0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, zero), v);
        const __m512 o0 =
            _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, _mm512_set1_epi32(1)), v);
        const __m512 e1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, w0), v);
        const __m512 o1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, w1), v);
        _mm512_mask_storeu_ps(r0 + 2 * ow, lo2, _mm512_permutex2var_ps(e0, mixLo, o0));
        _mm512_mask_storeu_ps(r0 + 2 * ow + 16, hi2, _mm512_permutex2var_ps(e0, mixHi, o0));
        _mm512_mask_storeu_ps(r1 + 2 * ow, lo2, _mm512_permutex2var_ps(e1, mixLo, o1));
        _mm512_mask_storeu_ps(r1 + 2 * ow + 16, hi2, _mm512_permutex2var_ps(e1, mixHi, o1));
      }
#endif
      for (; ow < OW; ++ow) {
        const int32_t i = a[oh * OW + ow] - base - static_cast<int32_t>(2 * ow);
        const float v = g[oh * OW + ow];
        r0[2 * ow] = i == 0 ? v : 0.f;
        r0[2 * ow + 1] = i == 1 ? v : 0.f;
        r1[2 * ow] = i == W ? v : 0.f;
        r1[2 * ow + 1] = i == W + 1 ? v : 0.f;
      }
      if (W > 2 * OW) r0[W - 1] = r1[W - 1] = 0.f;  // odd width: last column is in no window
    }
    if (H > 2 * OH) std::memset(gp + (H - 1) * W, 0, static_cast<size_t>(W) * sizeof(float));
  }
}

}  // namespace

void maxPool2dForward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  const int64_t H = s.H, W = s.W, OH = s.outH(), OW = s.outW();
  if (s.N * s.C == 0 || OH <= 0 || OW <= 0) return;
  if (s.KH == 2 && s.KW == 2 && s.strideH == 2 && s.strideW == 2 && s.padH == 0 && s.padW == 0) {
    forPlanes(s, H * W, [&](int64_t lo, int64_t hi) { maxPool2x2(s, x, y, argmax, lo, hi); });
    return;
  }
  forPlanes(s, OH * OW * s.KH * s.KW, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const float* xp = x + p * H * W;
      float* yp = y + p * OH * OW;
      int32_t* ap = argmax + p * OH * OW;
      forEachWindow(s, [&](int64_t o, int64_t hb, int64_t he, int64_t wb, int64_t we) {
        float m = -std::numeric_limits<float>::infinity();
        int64_t best = hb * W + wb;  // a window of padding only: index of its clamp
        for (int64_t h = hb; h < he && m == m; ++h)
          for (int64_t w = wb; w < we; ++w) {
            const float v = xp[h * W + w];
            if (v > m || v != v) {
              m = v;
              best = h * W + w;
              if (v != v) break;
            }
          }
        yp[o] = m;
        ap[o] = static_cast<int32_t>(best);
      });
    }
  });
}

void maxPool2dBackward(const PoolShape& s, const float* gy, const int32_t* argmax, float* gx) {
  const int64_t HW = s.H * s.W, OHW = s.outH() * s.outW();
  if (s.N * s.C == 0) return;
  if (s.KH == 2 && s.KW == 2 && s.strideH == 2 && s.strideW == 2 && s.padH == 0 && s.padW == 0 &&
      OHW > 0) {
    forPlanes(s, HW,
              [&](int64_t lo, int64_t hi) { maxPool2x2Backward(s, gy, argmax, gx, lo, hi); });
    return;
  }
  forPlanes(s, HW, [&](int64_t lo, int64_t hi) {
    std::memset(gx + lo * HW, 0, static_cast<size_t>((hi - lo) * HW) * sizeof(float));
    if (OHW <= 0) return;
    for (int64_t p = lo; p < hi; ++p) {
      float* gp = gx + p * HW;
      const float* g = gy + p * OHW;
      const int32_t* a = argmax + p * OHW;
      // += because overlapping windows (stride < kernel) may pick the same input.
      for (int64_t i = 0; i < OHW; ++i) gp[a[i]] += g[i];
    }
  });
}

void avgPool2dForward(const PoolShape& s, const float* x, float* y) {
  const int64_t H = s.H, W = s.W, OH = s.outH(), OW = s.outW();
  if (s.N * s.C == 0 || OH <= 0 || OW <= 0) return;
  const float inv = 1.f / static_cast<float>(s.KH * s.KW);  // count_include_pad=True
  forPlanes(s, OH * OW * s.KH * s.KW, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const float* xp = x + p * H * W;
      float* yp = y + p * OH * OW;
      forEachWindow(s, [&](int64_t o, int64_t hb, int64_t he, int64_t wb, int64_t we) {
        float acc = 0.f;
        for (int64_t h = hb; h < he; ++h)
          for (int64_t w = wb; w < we; ++w) acc += xp[h * W + w];
        yp[o] = acc * inv;
      });
    }
  });
}

void avgPool2dBackward(const PoolShape& s, const float* gy, float* gx) {
  const int64_t H = s.H, W = s.W, OH = s.outH(), OW = s.outW();
  if (s.N * s.C == 0) return;
  const float inv = 1.f / static_cast<float>(s.KH * s.KW);
  forPlanes(s, H * W, [&](int64_t lo, int64_t hi) {
    std::memset(gx + lo * H * W, 0, static_cast<size_t>((hi - lo) * H * W) * sizeof(float));
    if (OH <= 0 || OW <= 0) return;
    for (int64_t p = lo; p < hi; ++p) {
      float* gp = gx + p * H * W;
      const float* gyp = gy + p * OH * OW;
      forEachWindow(s, [&](int64_t o, int64_t hb, int64_t he, int64_t wb, int64_t we) {
        const float g = gyp[o] * inv;
        for (int64_t h = hb; h < he; ++h)
          for (int64_t w = wb; w < we; ++w) gp[h * W + w] += g;
      });
    }
  });
}

}  // namespace dtrain::kernels
