#include "tensor/cpu/Elementwise.h"

#include "tensor/Half.h"

#include <cstring>


#include "tensor/cpu/FastMath.h"
#include "tensor/cpu/Parallel.h"

// The loops below are written plainly so that GCC vectorizes them; outputs may
// alias inputs exactly (in-place ops), so no pointer is marked __restrict and GCC
// versions each loop with a runtime overlap check instead.
namespace dtrain::kernels {
namespace {

using detail::forRange;
using detail::kElementwiseGrain;

template <typename Op>
inline void binary(const float* a, const float* b, float* out, int64_t n, Op op) {
  forRange(n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = op(a[i], b[i]);
  });
}

template <typename Op>
inline void unary(const float* x, float* out, int64_t n, Op op) {
  forRange(n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = op(x[i]);
  });
}

}  // namespace

void add(const float* a, const float* b, float* out, int64_t n) {
  binary(a, b, out, n, [](float u, float v) { return u + v; });
}
void sub(const float* a, const float* b, float* out, int64_t n) {
  binary(a, b, out, n, [](float u, float v) { return u - v; });
}
void mul(const float* a, const float* b, float* out, int64_t n) {
  binary(a, b, out, n, [](float u, float v) { return u * v; });
}
void scale(const float* x, float alpha, float* out, int64_t n) {
  unary(x, out, n, [alpha](float u) { return alpha * u; });
}
void axpy(float alpha, const float* x, float* y, int64_t n) {
  binary(x, y, y, n, [alpha](float u, float v) { return v + alpha * u; });
}

void relu(const float* x, float* y, int64_t n) {
  // Written as "x < 0 ? 0 : x" so a NaN input stays NaN, as in torch.
  unary(x, y, n, [](float u) { return u < 0.f ? 0.f : u; });
}
void reluBackward(const float* y, const float* gy, float* gx, int64_t n) {
  binary(y, gy, gx, n, [](float out, float g) { return out > 0.f ? g : 0.f; });
}
void sigmoid(const float* x, float* y, int64_t n) {
  unary(x, y, n, [](float u) { return detail::fastSigmoid(u); });
}
void sigmoidBackward(const float* y, const float* gy, float* gx, int64_t n) {
  binary(y, gy, gx, n, [](float s, float g) { return g * s * (1.f - s); });
}
void tanh(const float* x, float* y, int64_t n) {
  unary(x, y, n, [](float u) { return detail::fastTanh(u); });
}
void tanhBackward(const float* y, const float* gy, float* gx, int64_t n) {
  binary(y, gy, gx, n, [](float t, float g) { return g * (1.f - t * t); });
}
namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
inline float geluCdf(float u) { return 0.5f * (1.f + detail::fastErf(u * kInvSqrt2)); }
inline float geluPdf(float u) { return kInvSqrt2Pi * detail::fastExp(-0.5f * u * u); }
}  // namespace

void gelu(const float* x, float* y, int64_t n) {
  unary(x, y, n, [](float u) { return u * geluCdf(u); });
}
void geluBackward(const float* x, const float* gy, float* gx, int64_t n) {
  binary(x, gy, gx, n, [](float u, float g) { return g * (geluCdf(u) + u * geluPdf(u)); });
}
void geluWithDerivative(const float* x, float* y, float* dydx, int64_t n) {
  forRange(n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const float u = x[i], cdf = geluCdf(u);
      y[i] = u * cdf;
      dydx[i] = cdf + u * geluPdf(u);
    }
  });
}

void geluWithDerivativeBf16(const float* x, float* y, BFloat16* dydx, int64_t n) {
  forRange(n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const float u = x[i], cdf = geluCdf(u);
      y[i] = u * cdf;
      dydx[i].bits = floatToBf16(cdf + u * geluPdf(u));
    }
  });
}

void fillRows(float* y, const float* row, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(y + r * cols, row, static_cast<size_t>(cols) * sizeof(float));
}

void sumRows(const float* x, float* out, int64_t rows, int64_t cols, bool accumulate) {
  // Row by row into out: contiguous, vectorized over columns. Serial on purpose:
  // callers sum [batch, features] gradients, far below the parallel grain, and a
  // fixed order keeps results bitwise reproducible.
  float* __restrict o = out;
  if (!accumulate)
    for (int64_t c = 0; c < cols; ++c) o[c] = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) o[c] += xr[c];
  }
}

}  // namespace dtrain::kernels
