#include "tensor/cpu/Im2col.h"

#include <algorithm>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace dtrain::kernels::detail {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Output columns [lo, hi) whose input column ow*stride - pad + kw lies in [0, W).
void validCols(const ConvShape& s, int64_t kw, int64_t& lo, int64_t& hi) {
  const int64_t OW = s.outW();
  lo = std::clamp<int64_t>(ceilDiv(s.padW - kw, s.strideW), 0, OW);
  hi = std::clamp<int64_t>(floorDiv(s.W - 1 + s.padW - kw, s.strideW) + 1, lo, OW);
}

void im2colGeneric(const ConvShape& s, const float* x, float* col, int64_t ldc) {
  const int64_t OH = s.outH(), OW = s.outW();
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        float* dst = col + ((ci * s.KH + kh) * s.KW + kw) * ldc;
        int64_t lo, hi;
        validCols(s, kw, lo, hi);
        for (int64_t oh = 0; oh < OH; ++oh, dst += OW) {
          const int64_t ih = oh * s.strideH - s.padH + kh;
          if (ih < 0 || ih >= s.H) {
            std::fill(dst, dst + OW, 0.f);
            continue;
          }
          const float* src = x + (ci * s.H + ih) * s.W - s.padW + kw;
          std::fill(dst, dst + lo, 0.f);
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * s.strideW];
          std::fill(dst + hi, dst + OW, 0.f);
        }
      }
}

void col2imGeneric(const ConvShape& s, const float* col, int64_t ldc, float* gx) {
  const int64_t OH = s.outH(), OW = s.outW();
  std::fill(gx, gx + s.Cin * s.H * s.W, 0.f);
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        const float* src = col + ((ci * s.KH + kh) * s.KW + kw) * ldc;
        int64_t lo, hi;
        validCols(s, kw, lo, hi);
        for (int64_t oh = 0; oh < OH; ++oh, src += OW) {
          const int64_t ih = oh * s.strideH - s.padH + kh;
          if (ih < 0 || ih >= s.H) continue;
          float* dst = gx + (ci * s.H + ih) * s.W - s.padW + kw;
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow * s.strideW] += src[ow];
        }
      }
}

#if defined(__AVX512F__)
// Lanes [lo, hi) of a 16-lane vector, clipped to [0, 16].
inline __mmask16 laneRange(int64_t lo, int64_t hi) {
  lo = std::clamp<int64_t>(lo, 0, 16);
  hi = std::clamp<int64_t>(hi, lo, 16);
  const uint32_t upTo = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  const uint32_t below = (1u << lo) - 1u;
  return static_cast<__mmask16>(upTo & ~below);
}

// Stride 1: every output row is a shifted input row, so each 16-wide piece is
// one masked load (zeros where the padding is) and one masked store. Masked-off
// lanes are never accessed, so addresses left of the row start are harmless.
// Masks depend only on kw and the piece, so they are hoisted out of the row loop.
constexpr int64_t kMaxPieces = 8;  // rows up to 128 wide; wider ones go generic

void im2colStride1(const ConvShape& s, const float* x, float* col, int64_t ldc) {
  const int64_t OH = s.outH(), OW = s.outW(), pieces = (OW + 15) / 16;
  __mmask16 store[kMaxPieces], load[kMaxPieces];
  for (int64_t j = 0; j < pieces; ++j) store[j] = laneRange(0, OW - 16 * j);
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    for (int64_t kh = 0; kh < s.KH; ++kh) {
      // Output rows whose input row oh - padH + kh is inside the image.
      const int64_t ohLo = std::clamp<int64_t>(s.padH - kh, 0, OH);
      const int64_t ohHi = std::clamp<int64_t>(s.H + s.padH - kh, ohLo, OH);
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        float* dst = col + ((ci * s.KH + kh) * s.KW + kw) * ldc;
        const int64_t shift = kw - s.padW;  // input column = ow + shift
        for (int64_t j = 0; j < pieces; ++j)
          load[j] = laneRange(-shift - 16 * j, s.W - shift - 16 * j) & store[j];
        const float* src = x + (ci * s.H + ohLo - s.padH + kh) * s.W + shift;
        const __m512 zero = _mm512_setzero_ps();
        for (int64_t oh = 0; oh < ohLo; ++oh)
          for (int64_t j = 0; j < pieces; ++j)
            _mm512_mask_storeu_ps(dst + oh * OW + 16 * j, store[j], zero);
        if (pieces == 1) {
          const __mmask16 st = store[0], ld = load[0];
          for (int64_t oh = ohLo; oh < ohHi; ++oh, src += s.W)
            _mm512_mask_storeu_ps(dst + oh * OW, st, _mm512_maskz_loadu_ps(ld, src));
        } else {
          for (int64_t oh = ohLo; oh < ohHi; ++oh, src += s.W)
            for (int64_t j = 0; j < pieces; ++j)
              _mm512_mask_storeu_ps(dst + oh * OW + 16 * j, store[j],
                                    _mm512_maskz_loadu_ps(load[j], src + 16 * j));
        }
        for (int64_t oh = ohHi; oh < OH; ++oh)
          for (int64_t j = 0; j < pieces; ++j)
            _mm512_mask_storeu_ps(dst + oh * OW + 16 * j, store[j], zero);
      }
    }
}

// Stride 1 adjoint, gathered: each 16-wide piece of a gx row sums its KH*KW
// shifted col rows in a register and is stored once, so no store ever feeds a
// later overlapping load (the scatter form stalls on store forwarding).
constexpr int64_t kMaxKW = 16;

void col2imStride1(const ConvShape& s, const float* col, int64_t ldc, float* gx) {
  const int64_t OH = s.outH(), OW = s.outW(), pieces = (s.W + 15) / 16;
  for (int64_t j = 0; j < pieces; ++j) {
    const int64_t o = 16 * j;
    const __mmask16 store = laneRange(0, s.W - o);
    __mmask16 load[kMaxKW];
    for (int64_t kw = 0; kw < s.KW; ++kw)  // output column = iw + padW - kw
      load[kw] = laneRange(kw - s.padW - o, OW + kw - s.padW - o) & store;
    for (int64_t ci = 0; ci < s.Cin; ++ci)
      for (int64_t ih = 0; ih < s.H; ++ih) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        const int64_t khLo = std::max<int64_t>(0, ih + s.padH - OH + 1);
        const int64_t khHi = std::min<int64_t>(s.KH, ih + s.padH + 1);
        for (int64_t kh = khLo; kh < khHi; ++kh) {
          const float* row =
              col + (ci * s.KH + kh) * s.KW * ldc + (ih + s.padH - kh) * OW + s.padW + o;
          int64_t kw = 0;
          for (; kw + 2 <= s.KW; kw += 2, row += 2 * ldc) {
            acc0 = _mm512_add_ps(acc0, _mm512_maskz_loadu_ps(load[kw], row - kw));
            acc1 = _mm512_add_ps(acc1, _mm512_maskz_loadu_ps(load[kw + 1], row + ldc - kw - 1));
          }
          if (kw < s.KW) acc0 = _mm512_add_ps(acc0, _mm512_maskz_loadu_ps(load[kw], row - kw));
        }
        _mm512_mask_storeu_ps(gx + (ci * s.H + ih) * s.W + o, store, _mm512_add_ps(acc0, acc1));
      }
  }
}
#endif

}  // namespace

void im2col(const ConvShape& s, const float* x, float* col, int64_t ldc) {
#if defined(__AVX512F__)
  if (s.strideW == 1 && s.strideH == 1 && s.outW() <= 16 * kMaxPieces)
    return im2colStride1(s, x, col, ldc);
#endif
  im2colGeneric(s, x, col, ldc);
}

void col2im(const ConvShape& s, const float* col, int64_t ldc, float* gx) {
#if defined(__AVX512F__)
  if (s.strideW == 1 && s.strideH == 1 && s.KW <= kMaxKW) return col2imStride1(s, col, ldc, gx);
#endif
  col2imGeneric(s, col, ldc, gx);
}

}  // namespace dtrain::kernels::detail
