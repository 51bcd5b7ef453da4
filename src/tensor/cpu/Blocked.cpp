#include "tensor/cpu/Blocked.h"

#include "tensor/cpu/Parallel.h"
#include "tensor/cpu/Pool.h"

namespace dtrain::kernels {

// One (n, channel block) at a time: a 16 x S transpose, parallel over blocks.
void toChannelBlocked(const float* x, float* out, int64_t N, int64_t C, int64_t S) {
  const int64_t blocks = N * (C / kChannelBlock);
  detail::forRange(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const float* __restrict src = x + b * kChannelBlock * S;
      float* __restrict dst = out + b * kChannelBlock * S;
      for (int64_t s = 0; s < S; ++s)
        for (int64_t l = 0; l < kChannelBlock; ++l) dst[s * kChannelBlock + l] = src[l * S + s];
    }
  });
}

void fromChannelBlocked(const float* x, float* out, int64_t N, int64_t C, int64_t S) {
  const int64_t blocks = N * (C / kChannelBlock);
  detail::forRange(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const float* __restrict src = x + b * kChannelBlock * S;
      float* __restrict dst = out + b * kChannelBlock * S;
      for (int64_t l = 0; l < kChannelBlock; ++l)
        for (int64_t s = 0; s < S; ++s) dst[l * S + s] = src[s * kChannelBlock + l];
    }
  });
}

}  // namespace dtrain::kernels

namespace dtrain::kernels {

void globalAvgPoolBlocked(const float* x, float* y, int64_t N, int64_t C, int64_t S) {
  const float inv = 1.f / static_cast<float>(S);
  const int64_t blocks = N * (C / kChannelBlock);
  detail::forRange(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const float* __restrict src = x + b * kChannelBlock * S;
      float acc[kChannelBlock] = {};
      for (int64_t s = 0; s < S; ++s)
        for (int64_t l = 0; l < kChannelBlock; ++l) acc[l] += src[s * kChannelBlock + l];
      for (int64_t l = 0; l < kChannelBlock; ++l) y[b * kChannelBlock + l] = acc[l] * inv;
    }
  });
}

void globalAvgPoolBackwardBlocked(const float* gy, float* gx, int64_t N, int64_t C, int64_t S) {
  const float inv = 1.f / static_cast<float>(S);
  const int64_t blocks = N * (C / kChannelBlock);
  detail::forRange(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      float g[kChannelBlock];
      for (int64_t l = 0; l < kChannelBlock; ++l) g[l] = gy[b * kChannelBlock + l] * inv;
      float* __restrict dst = gx + b * kChannelBlock * S;
      for (int64_t s = 0; s < S; ++s)
        for (int64_t l = 0; l < kChannelBlock; ++l) dst[s * kChannelBlock + l] = g[l];
    }
  });
}

}  // namespace dtrain::kernels
