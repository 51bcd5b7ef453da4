#include "tensor/cpu/Norm.h"

#include <algorithm>
#include <cmath>

#include "tensor/cpu/Lanes.h"
#include "tensor/cpu/Parallel.h"

namespace dtrain::kernels {

// Layer norm rows are short (the model width): float lane sums (Lanes.h) and
// branch-free row loops, two passes for the variance (mean first), with the
// affine and non-affine forms as separate loops so each one vectorizes.
void layerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                      float* saveMean, float* saveInvStd, int64_t R, int64_t D, float eps) {
  const float invD = D > 0 ? 1.f / static_cast<float>(D) : 0.f;
  for (int64_t r = 0; r < R; ++r) {
    const float* __restrict xr = x + r * D;
    float* __restrict yr = y + r * D;
    const float m = detail::laneSum(D, [=](int64_t d) { return xr[d]; }) * invD;
    const float var = detail::laneSum(D, [=](int64_t d) { return (xr[d] - m) * (xr[d] - m); }) * invD;
    const float inv = 1.f / std::sqrt(var + eps);
    saveMean[r] = m;
    saveInvStd[r] = inv;
    if (gamma && beta)
      for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - m) * inv * gamma[d] + beta[d];
    else
      for (int64_t d = 0; d < D; ++d)
        yr[d] = (xr[d] - m) * inv * (gamma ? gamma[d] : 1.f) + (beta ? beta[d] : 0.f);
  }
}

void layerNormBackward(const float* x, const float* gamma, const float* saveMean,
                       const float* saveInvStd, const float* gy, float* gx, float* ggamma,
                       float* gbeta, int64_t R, int64_t D) {
  // Per row, with g = gy * gamma and xhat = (x - mean) * invStd:
  //   gx = invStd * (g - mean(g) - xhat * mean(g * xhat)).
  if (ggamma)
    for (int64_t d = 0; d < D; ++d) ggamma[d] = 0.f;
  if (gbeta)
    for (int64_t d = 0; d < D; ++d) gbeta[d] = 0.f;
  const float invD = D > 0 ? 1.f / static_cast<float>(D) : 0.f;
  for (int64_t r = 0; r < R; ++r) {
    const float* __restrict xr = x + r * D;
    const float* __restrict gr = gy + r * D;
    const float m = saveMean[r], inv = saveInvStd[r];
    if (ggamma)
      for (int64_t d = 0; d < D; ++d) ggamma[d] += gr[d] * (xr[d] - m) * inv;
    if (gbeta)
      for (int64_t d = 0; d < D; ++d) gbeta[d] += gr[d];
    if (!gx) continue;
    float meanG, meanGX;
    if (gamma) {
      meanG = detail::laneSum(D, [=](int64_t d) { return gr[d] * gamma[d]; }) * invD;
      meanGX = detail::laneSum(D, [=](int64_t d) { return gr[d] * gamma[d] * (xr[d] - m); }) * inv * invD;
    } else {
      meanG = detail::laneSum(D, [=](int64_t d) { return gr[d]; }) * invD;
      meanGX = detail::laneSum(D, [=](int64_t d) { return gr[d] * (xr[d] - m); }) * inv * invD;
    }
    float* __restrict out = gx + r * D;
    if (gamma)
      for (int64_t d = 0; d < D; ++d)
        out[d] = inv * (gr[d] * gamma[d] - meanG - (xr[d] - m) * inv * meanGX);
    else
      for (int64_t d = 0; d < D; ++d) out[d] = inv * (gr[d] - meanG - (xr[d] - m) * inv * meanGX);
  }
}

}  // namespace dtrain::kernels

namespace dtrain::kernels {
namespace {

// Channels per part: a part streams at least kElementwiseGrain floats.
int64_t channelGrain(int64_t N, int64_t S) {
  return std::max<int64_t>(1, detail::kElementwiseGrain / std::max<int64_t>(1, N * S));
}

template <bool kResidual, bool kRelu>
void applyRows(const float* x, const float* scale, const float* shift, const float* residual,
               float* y, int64_t N, int64_t C, int64_t S) {
  detail::forRange(C, channelGrain(N, S), [&](int64_t lo, int64_t hi) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = lo; c < hi; ++c) {
        const int64_t o = (n * C + c) * S;
        const float* __restrict xp = x + o;
        const float* __restrict rp = kResidual ? residual + o : nullptr;
        float* __restrict yp = y + o;
        const float a = scale[c], b = shift[c];
        for (int64_t s = 0; s < S; ++s) {
          float v = xp[s] * a + b;
          if constexpr (kResidual) v += rp[s];
          if constexpr (kRelu) v = v > 0.f ? v : 0.f;
          yp[s] = v;
        }
      }
  });
}

}  // namespace

// The reductions walk memory in order (n outer, c inner: each (n, c) row is
// contiguous), adding each row's float lane sums into the channel's doubles;
// channel-outer order would jump C*S floats between rows, which for 7x7 maps
// (rows of 196 bytes) defeats the prefetcher.
void batchNormSums(const float* x, const float* pivot, double* sum, double* sumSq, int64_t N,
                   int64_t C, int64_t S) {
  detail::forRange(C, channelGrain(N, S), [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) sum[c] = sumSq[c] = 0.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = lo; c < hi; ++c) {
        const float k = pivot[c];
        const float* __restrict p = x + (n * C + c) * S;
        float a[detail::kLanes] = {}, b[detail::kLanes] = {};
        int64_t i = 0;
        for (; i + detail::kLanes <= S; i += detail::kLanes)
          for (int l = 0; l < detail::kLanes; ++l) {
            const float d = p[i + l] - k;
            a[l] += d;
            b[l] += d * d;
          }
        float ra = 0.f, rb = 0.f;
        for (; i < S; ++i) {
          const float d = p[i] - k;
          ra += d;
          rb += d * d;
        }
        for (int l = 0; l < detail::kLanes; ++l) ra += a[l], rb += b[l];
        sum[c] += ra;
        sumSq[c] += rb;
      }
  });
}

void batchNormApply(const float* x, const float* scale, const float* shift, const float* residual,
                    bool relu, float* y, int64_t N, int64_t C, int64_t S) {
  if (residual) {
    if (relu) applyRows<true, true>(x, scale, shift, residual, y, N, C, S);
    else applyRows<true, false>(x, scale, shift, residual, y, N, C, S);
  } else {
    if (relu) applyRows<false, true>(x, scale, shift, residual, y, N, C, S);
    else applyRows<false, false>(x, scale, shift, residual, y, N, C, S);
  }
}

void batchNormBackwardSums(const float* x, const float* y, const float* gy, const float* mean,
                           float* gMasked, double* sumG, double* sumGX, int64_t N, int64_t C,
                           int64_t S) {
  detail::forRange(C, channelGrain(N, S), [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) sumG[c] = sumGX[c] = 0.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = lo; c < hi; ++c) {
        const float m = mean[c];
        const int64_t o = (n * C + c) * S;
        const float* __restrict xp = x + o;
        const float* __restrict gp = gy + o;
        float a[detail::kLanes] = {}, b[detail::kLanes] = {};
        float ra = 0.f, rb = 0.f;
        int64_t i = 0;
        if (y) {  // through the ReLU: the gradient where the output was positive
          const float* __restrict yp = y + o;
          float* __restrict mp = gMasked + o;
          for (; i + detail::kLanes <= S; i += detail::kLanes)
            for (int l = 0; l < detail::kLanes; ++l) {
              const float g = yp[i + l] > 0.f ? gp[i + l] : 0.f;
              mp[i + l] = g;
              a[l] += g;
              b[l] += g * (xp[i + l] - m);
            }
          for (; i < S; ++i) {
            const float g = yp[i] > 0.f ? gp[i] : 0.f;
            mp[i] = g;
            ra += g;
            rb += g * (xp[i] - m);
          }
        } else {
          for (; i + detail::kLanes <= S; i += detail::kLanes)
            for (int l = 0; l < detail::kLanes; ++l) {
              a[l] += gp[i + l];
              b[l] += gp[i + l] * (xp[i + l] - m);
            }
          for (; i < S; ++i) {
            ra += gp[i];
            rb += gp[i] * (xp[i] - m);
          }
        }
        for (int l = 0; l < detail::kLanes; ++l) ra += a[l], rb += b[l];
        sumG[c] += ra;
        sumGX[c] += rb;
      }
  });
}

void batchNormBackwardApply(const float* x, const float* g, const float* mean, const float* k,
                            const float* meanG, const float* q, float* gx, int64_t N, int64_t C,
                            int64_t S) {
  detail::forRange(C, channelGrain(N, S), [&](int64_t lo, int64_t hi) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = lo; c < hi; ++c) {
        const int64_t o = (n * C + c) * S;
        const float* __restrict xp = x + o;
        const float* __restrict gp = g + o;
        float* __restrict op = gx + o;
        const float kc = k[c], mg = meanG[c], m = mean[c], qc = q[c];
        for (int64_t s = 0; s < S; ++s) op[s] = kc * (gp[s] - mg - (xp[s] - m) * qc);
      }
  });
}

}  // namespace dtrain::kernels
