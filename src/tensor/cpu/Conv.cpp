#include "tensor/cpu/Conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/Error.h"
#include "core/ThreadPool.h"
#include "tensor/cpu/Im2col.h"
#include "core/Scratch.h"
#include "tensor/cpu/Parallel.h"
#include "tensor/cpu/SmallGemm.h"

// Convolution as small GEMMs (SmallGemm.h) over an im2col matrix that is either
// built (Im2col.h) or, for stride 1, implicit: the "wide" layout below reads its
// rows as shifted slices of the padded image. Forward and input gradient go one
// image at a time; the weight gradient sums chunks of images. Scratch lives in
// thread_local buffers that only grow, so steady-state training allocates
// nothing here.
namespace dtrain::kernels {
namespace {

// Bytes of im2col matrix (and transposed output gradient) per weight-gradient
// chunk: small enough that a chunk stays in L2, large enough to amortize the loop.
constexpr int64_t kChunkBytes = 160 * 1024;
// The wide layout reads each operand row through shifted, unaligned loads;
// fastest with one image per chunk (its rows then stay in L1).
constexpr int64_t kWideChunkBytes = 32 * 1024;

float* grow(ScratchBuffer<float>& v, int64_t n) { return v.grow(n); }

struct Workspace {
  ScratchBuffer<float> col, gyc, gcol, padded, wide;
  ScratchBuffer<int64_t> offsets;
};
Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

void checkShape(const ConvShape& s, const char* op) {
  DTRAIN_CHECK(s.N >= 0 && s.Cin >= 0 && s.H >= 0 && s.W >= 0 && s.Cout >= 0 && s.KH > 0 &&
                   s.KW > 0 && s.strideH > 0 && s.strideW > 0 && s.padH >= 0 && s.padW >= 0,
               op, ": bad shape N=", s.N, " Cin=", s.Cin, " H=", s.H, " W=", s.W, " Cout=", s.Cout,
               " K=", s.KH, "x", s.KW, " stride=", s.strideH, "x", s.strideW, " pad=", s.padH, "x",
               s.padW);
  DTRAIN_CHECK(s.H + 2 * s.padH >= s.KH && s.W + 2 * s.padW >= s.KW, op, ": kernel ", s.KH, "x",
               s.KW, " larger than the padded input ", s.H + 2 * s.padH, "x", s.W + 2 * s.padW);
}

// out[r] += sum of row r of a [rows, L] matrix. 16 lanes of partial sums: a
// plain float sum does not vectorize (no -ffast-math) and is latency-bound.
void addRowSums(const float* g, int64_t rows, int64_t L, float* out) {
  for (int64_t r = 0; r < rows; ++r, g += L) {
    float part[16] = {};
    int64_t l = 0;
    for (; l + 16 <= L; l += 16)
      for (int i = 0; i < 16; ++i) part[i] += g[l + i];
    float sum = 0.f;
    for (; l < L; ++l) sum += g[l];
    for (int i = 0; i < 16; ++i) sum += part[i];
    out[r] += sum;
  }
}

int64_t paddedArea(const ConvShape& s) { return (s.H + 2 * s.padH) * (s.W + 2 * s.padW); }

// How the weight gradient reads the im2col matrix.
enum class GradMode {
  Dense,    // built by im2col for a chunk of images (any stride)
  Window,   // stride 1: implicit, each row a 2-d window of the padded image
  WideDot,  // stride 1, few output channels: dot products in the wide layout
};

GradMode gradMode(const ConvShape& s) {
  if (s.strideH != 1 || s.strideW != 1) return GradMode::Dense;
  // Window vectorizes over output channels, so with fewer than 12 of them most
  // lanes idle; WideDot vectorizes over pixels instead but computes every padded
  // pixel, which pays while the padded image is not much larger than the output
  // (LeNet conv1: 32x32 for 28x28 and 6 channels).
  if (s.Cout < 12 && 2 * paddedArea(s) <= 3 * s.outH() * s.outW()) return GradMode::WideDot;
  return GradMode::Window;
}

// gyT[p, co] = gy[co, p] for one image ([Cout, P] -> [P, Cout]).
void transposeImage(const float* gy, int64_t Cout, int64_t P, float* gyT) {
  for (int64_t p = 0; p < P; ++p)
    for (int64_t co = 0; co < Cout; ++co) gyT[p * Cout + co] = gy[co * P + p];
}

// Copies image n into the zero-padded [Cin, Hp, Wp] buffer xp (borders stay
// zero between images) or, without padding, returns the image itself.
const float* paddedImage(const ConvShape& s, const float* x, int64_t n, float* xp) {
  const float* xn = x + n * s.Cin * s.H * s.W;
  if (s.padH == 0 && s.padW == 0) return xn;
  const int64_t Hp = s.H + 2 * s.padH, Wp = s.W + 2 * s.padW;
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    for (int64_t h = 0; h < s.H; ++h)
      std::memcpy(xp + (ci * Hp + h + s.padH) * Wp + s.padW, xn + (ci * s.H + h) * s.W,
                  static_cast<size_t>(s.W) * sizeof(float));
  return xp;
}

// offsets[k] = ci*channelStride + kh*Wp + kw for k = (ci, kh, kw): where row k
// of the implicit im2col matrix starts.
int64_t* windowOffsets(const ConvShape& s, int64_t channelStride, int64_t Wp) {
  Workspace& ws = workspace();
  const int64_t K = s.Cin * s.KH * s.KW;
  int64_t* offsets = ws.offsets.grow(K);
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    for (int64_t kh = 0; kh < s.KH; ++kh)
      for (int64_t kw = 0; kw < s.KW; ++kw)
        offsets[(ci * s.KH + kh) * s.KW + kw] = ci * channelStride + kh * Wp + kw;
  return offsets;
}

// Stride 1, one image at a time: gwT[K, Cout] += A' gyT, where row k of A' is
// the OH x OW window of the padded image at offsets[k] (gemmWindowA), so no
// im2col matrix is written or read back.
void gradChunkWindow(const ConvShape& s, const float* x, const float* gy, int64_t n0, int64_t n1,
                     float* gwtAcc, float* gbAcc) {
  const int64_t OH = s.outH(), OW = s.outW(), P = OH * OW, K = s.Cin * s.KH * s.KW;
  const int64_t Cout = s.Cout, Wp = s.W + 2 * s.padW, area = paddedArea(s);
  if (gbAcc)
    for (int64_t n = n0; n < n1; ++n) addRowSums(gy + n * Cout * P, Cout, P, gbAcc);
  if (!gwtAcc) return;
  Workspace& ws = workspace();
  float* xp = grow(ws.padded, s.Cin * area);
  std::fill(xp, xp + s.Cin * area, 0.f);
  const int64_t* offsets = windowOffsets(s, area, Wp);
  float* gyT = grow(ws.gyc, P * Cout);
  for (int64_t n = n0; n < n1; ++n) {
    const float* src = paddedImage(s, x, n, xp);
    transposeImage(gy + n * Cout * P, Cout, P, gyT);
    detail::gemmWindowA(K, Cout, OH, OW, Wp, src, offsets, gyT, Cout, gwtAcc, Cout);
  }
}

// Images [n0, n1): col[K, L] holds their im2col matrices side by side (L =
// images * P) and gyT[L, Cout] the output gradient transposed, so that
// gwT[K, Cout] += col gyT is a broadcast-A product whose accumulators stay in
// registers over the whole chunk (no horizontal sums, no split loads of A).
void gradChunkDense(const ConvShape& s, const float* x, const float* gy, int64_t n0, int64_t n1,
                    float* gwtAcc, float* gbAcc) {
  const int64_t P = s.outH() * s.outW(), K = s.Cin * s.KH * s.KW, Cout = s.Cout;
  const int64_t L = (n1 - n0) * P, inSize = s.Cin * s.H * s.W;
  if (gbAcc)
    for (int64_t n = n0; n < n1; ++n) addRowSums(gy + n * Cout * P, Cout, P, gbAcc);
  if (!gwtAcc) return;
  Workspace& ws = workspace();
  float* gyT = grow(ws.gyc, L * Cout);
  for (int64_t n = n0; n < n1; ++n)
    transposeImage(gy + n * Cout * P, Cout, P, gyT + (n - n0) * P * Cout);
  float* col = grow(ws.col, K * L);
  for (int64_t n = n0; n < n1; ++n) detail::im2col(s, x + n * inSize, col + (n - n0) * P, L);
  detail::gemmBroadcastA(K, Cout, L, col, L, nullptr, gyT, Cout, nullptr, gwtAcc, Cout, nullptr,
                         true);
}

// Stride 1, images [n0, n1) in the wide layout: xc[Cin, images, Hp*Wp] holds
// the zero-padded images channel-major, gyc[Cout, images, Hp*Wp] the output
// gradient at wide positions oh*Wp + ow and zeros elsewhere. Row k = (ci, kh,
// kw) of the implicit im2col matrix is then xc shifted by ci*L + kh*Wp + kw,
// and the zeros of gyc cancel every product that straddles rows or images.
void gradChunkWide(const ConvShape& s, const float* x, const float* gy, int64_t n0, int64_t n1,
                   float* gwAcc, float* gbAcc) {
  const int64_t OH = s.outH(), OW = s.outW(), P = OH * OW, K = s.Cin * s.KH * s.KW;
  const int64_t Cout = s.Cout, Wp = s.W + 2 * s.padW, area = paddedArea(s);
  const int64_t images = n1 - n0, L = images * area;
  const int64_t slack = (s.KH - 1) * Wp + s.KW;  // the last row's shifted reads
  Workspace& ws = workspace();
  float* gyc = grow(ws.gyc, Cout * L);
  std::fill(gyc, gyc + Cout * L, 0.f);
  for (int64_t co = 0; co < Cout; ++co)
    for (int64_t i = 0; i < images; ++i)
      for (int64_t oh = 0; oh < OH; ++oh)
        std::memcpy(gyc + co * L + i * area + oh * Wp, gy + ((n0 + i) * Cout + co) * P + oh * OW,
                    static_cast<size_t>(OW) * sizeof(float));
  if (gbAcc) addRowSums(gyc, Cout, L, gbAcc);
  if (!gwAcc) return;
  float* xc = grow(ws.col, s.Cin * L + slack);
  std::fill(xc, xc + s.Cin * L + slack, 0.f);
  for (int64_t ci = 0; ci < s.Cin; ++ci)
    for (int64_t i = 0; i < images; ++i)
      for (int64_t h = 0; h < s.H; ++h)
        std::memcpy(xc + ci * L + i * area + (h + s.padH) * Wp + s.padW,
                    x + (((n0 + i) * s.Cin + ci) * s.H + h) * s.W,
                    static_cast<size_t>(s.W) * sizeof(float));
  detail::gemmDotRows(Cout, K, L, gyc, L, xc, 0, windowOffsets(s, L, Wp), gwAcc, K, true);
}

// Stride-1 forward without an im2col matrix. Number the outputs by "wide"
// columns q = oh*Wp + ow over the padded width Wp: then row k = (ci, kh, kw) of
// the implicit im2col matrix is the contiguous slice of the padded image that
// starts at ci*Hp*Wp + kh*Wp + kw. Columns with ow >= OW straddle two rows; they
// are computed and dropped, which costs Wp/OW more arithmetic but saves writing
// and re-reading K*P floats per image.
bool wideForwardPays(const ConvShape& s) {
  if (s.strideH != 1 || s.strideW != 1) return false;
  const int64_t Wp = s.W + 2 * s.padW;
  return 2 * Wp <= 3 * s.outW();  // at most 1.5x the arithmetic
}

void forwardWide(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
                 int64_t lo, int64_t hi) {
  const int64_t OH = s.outH(), OW = s.outW(), P = OH * OW, K = s.Cin * s.KH * s.KW;
  const int64_t Hp = s.H + 2 * s.padH, Wp = s.W + 2 * s.padW, Pw = (OH - 1) * Wp + OW;
  Workspace& ws = workspace();
  const int64_t* offsets = windowOffsets(s, Hp * Wp, Wp);
  float* xp = grow(ws.padded, s.Cin * Hp * Wp);
  std::fill(xp, xp + s.Cin * Hp * Wp, 0.f);  // borders stay zero for all images
  float* yw = grow(ws.wide, s.Cout * Pw);
  for (int64_t n = lo; n < hi; ++n) {
    // The last wide row is cut at OW, so no row reads past the padded image.
    detail::gemmBroadcastA(s.Cout, Pw, K, w, K, nullptr, paddedImage(s, x, n, xp), 0, offsets, yw,
                           Pw, bias, false);
    float* yn = y + n * s.Cout * P;
    for (int64_t co = 0; co < s.Cout; ++co)
      for (int64_t oh = 0; oh < OH; ++oh)
        std::memcpy(yn + co * P + oh * OW, yw + co * Pw + oh * Wp,
                    static_cast<size_t>(OW) * sizeof(float));
  }
}

}  // namespace

void conv2dForward(const ConvShape& s, const float* x, const float* w, const float* bias,
                   float* y) {
  checkShape(s, "conv2dForward");
  const int64_t P = s.outH() * s.outW(), K = s.Cin * s.KH * s.KW;
  if (s.N == 0 || s.Cout == 0 || P == 0) return;
  if (wideForwardPays(s)) {
    detail::forRange(s.N, 1,
                     [&](int64_t lo, int64_t hi) { forwardWide(s, x, w, bias, y, lo, hi); });
    return;
  }
  detail::forRange(s.N, 1, [&](int64_t lo, int64_t hi) {
    float* col = grow(workspace().col, K * P);
    for (int64_t n = lo; n < hi; ++n) {
      detail::im2col(s, x + n * s.Cin * s.H * s.W, col, P);
      detail::gemmBroadcastA(s.Cout, P, K, w, K, nullptr, col, P, nullptr, y + n * s.Cout * P, P,
                             bias, false);
    }
  });
}

void conv2dBackward(const ConvShape& s, const float* x, const float* w, const float* gy, float* gx,
                    float* gw, float* gbias) {
  checkShape(s, "conv2dBackward");
  const int64_t P = s.outH() * s.outW(), K = s.Cin * s.KH * s.KW, Cout = s.Cout;
  const int64_t inSize = s.Cin * s.H * s.W, outSize = Cout * P;
  if (gw) std::fill(gw, gw + Cout * K, 0.f);
  if (gbias) std::fill(gbias, gbias + Cout, 0.f);
  if (s.N == 0) return;
  if (Cout == 0 || P == 0 || K == 0) {
    if (gx) std::fill(gx, gx + s.N * inSize, 0.f);
    return;
  }

  // Input gradient, per image: gcol[K, P] = w^T gy_n, then col2im. w^T is tiny
  // (K x Cout) and shared read-only by all threads.
  if (gx) {
    thread_local ScratchBuffer<float> wtBuf;
    float* wt = grow(wtBuf, K * Cout);
    for (int64_t co = 0; co < Cout; ++co)
      for (int64_t k = 0; k < K; ++k) wt[k * Cout + co] = w[co * K + k];
    detail::forRange(s.N, 1, [&](int64_t lo, int64_t hi) {
      float* gcol = grow(workspace().gcol, K * P);
      for (int64_t n = lo; n < hi; ++n) {
        detail::gemmBroadcastA(K, P, Cout, wt, Cout, nullptr, gy + n * outSize, P, nullptr, gcol, P,
                               nullptr, false);
        detail::col2im(s, gcol, P, gx + n * inSize);
      }
    });
  }
  if (!gw && !gbias) return;

  // Weight and bias gradients: sums over images. Chunks of images are laid side
  // by side so one GEMM covers the chunk. Each part (a fixed range of chunks, so
  // the summation order does not depend on scheduling) accumulates privately;
  // parts are added in order.
  const GradMode mode = gradMode(s);
  const bool wide =
      mode == GradMode::WideDot;  // accumulates gw as [Cout, K], the others as [K, Cout]
  const int64_t perImage = wide ? (s.Cin + Cout) * paddedArea(s) : (K + Cout) * P;
  const int64_t chunk =
      std::clamp<int64_t>((wide ? kWideChunkBytes : kChunkBytes) / (4 * perImage), 1, s.N);
  const int64_t chunks = (s.N + chunk - 1) / chunk;
  const int64_t parts = std::min<int64_t>(numThreads(), chunks);
  const int64_t accSize = Cout * K + Cout;
  thread_local ScratchBuffer<float> accBuf;
  float* acc = grow(accBuf, parts * accSize);
  std::fill(acc, acc + parts * accSize, 0.f);

  detail::forRange(parts, 1, [&](int64_t plo, int64_t phi) {
    for (int64_t part = plo; part < phi; ++part) {
      float* gwAcc = acc + part * accSize;
      const int64_t c0 = part * chunks / parts, c1 = (part + 1) * chunks / parts;
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t n0 = c * chunk, n1 = std::min(s.N, n0 + chunk);
        float* gwPart = gw ? gwAcc : nullptr;
        float* gbPart = gbias ? gwAcc + Cout * K : nullptr;
        if (mode == GradMode::WideDot)
          gradChunkWide(s, x, gy, n0, n1, gwPart, gbPart);
        else if (mode == GradMode::Window)
          gradChunkWindow(s, x, gy, n0, n1, gwPart, gbPart);
        else
          gradChunkDense(s, x, gy, n0, n1, gwPart, gbPart);
      }
    }
  });
  for (int64_t part = 0; part < parts; ++part) {
    const float* a = acc + part * accSize;
    if (gw && wide)
      for (int64_t i = 0; i < Cout * K; ++i) gw[i] += a[i];
    if (gw && !wide)
      for (int64_t co = 0; co < Cout; ++co)
        for (int64_t k = 0; k < K; ++k) gw[co * K + k] += a[k * Cout + co];
    if (gbias)
      for (int64_t co = 0; co < Cout; ++co) gbias[co] += a[Cout * K + co];
  }
}

}  // namespace dtrain::kernels
