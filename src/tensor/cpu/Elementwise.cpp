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
void div(const float* a, const float* b, float* out, int64_t n) {
  binary(a, b, out, n, [](float u, float v) { return u / v; });
}
void scale(const float* x, float alpha, float* out, int64_t n) {
  unary(x, out, n, [alpha](float u) { return alpha * u; });
}
void addScalar(const float* x, float alpha, float* out, int64_t n) {
  unary(x, out, n, [alpha](float u) { return u + alpha; });
}
void axpy(float alpha, const float* x, float* y, int64_t n) {
  binary(x, y, y, n, [alpha](float u, float v) { return v + alpha * u; });
}
void axpby(float alpha, const float* x, float beta, float* y, int64_t n) {
  binary(x, y, y, n, [alpha, beta](float u, float v) { return alpha * u + beta * v; });
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

void addRowBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  forRange(rows, kElementwiseGrain / (cols > 0 ? cols : 1) + 1, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      float* __restrict yr = y + r * cols;
      const float* __restrict b = bias;
      for (int64_t c = 0; c < cols; ++c) yr[c] += b[c];
    }
  });
}

void fillRows(float* y, const float* row, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(y + r * cols, row, static_cast<size_t>(cols) * sizeof(float));
}

void addChannelBias(float* y, const float* bias, int64_t N, int64_t C, int64_t S) {
  forRange(N * C, kElementwiseGrain / (S > 0 ? S : 1) + 1, [&](int64_t lo, int64_t hi) {
    for (int64_t nc = lo; nc < hi; ++nc) {
      float* __restrict p = y + nc * S;
      const float b = bias[nc % C];
      for (int64_t s = 0; s < S; ++s) p[s] += b;
    }
  });
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

void sumChannels(const float* x, float* out, int64_t N, int64_t C, int64_t S, bool accumulate) {
  for (int64_t c = 0; c < C; ++c) {
    float total = 0.f;
    for (int64_t n = 0; n < N; ++n) {
      const float* __restrict p = x + (n * C + c) * S;
      // Eight partial sums: lets GCC vectorize the reduction without -ffast-math.
      float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t s = 0;
      for (; s + 8 <= S; s += 8)
        for (int k = 0; k < 8; ++k) part[k] += p[s + k];
      float t = 0.f;
      for (; s < S; ++s) t += p[s];
      total += ((part[0] + part[1]) + (part[2] + part[3])) +
               ((part[4] + part[5]) + (part[6] + part[7])) + t;
    }
    out[c] = accumulate ? out[c] + total : total;
  }
}

}  // namespace dtrain::kernels
