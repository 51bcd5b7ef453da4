#pragma once
// Conversions between dtrain's plain NCHW activations and the channel-blocked
// layout oneDNN's direct convolutions work in (nChw16c: [N][C/16][H*W][16],
// 16 channels innermost, one AVX-512 register per pixel). Only for C a
// multiple of 16, where both layouts hold the same number of values.
#include <cstdint>

namespace dtrain::kernels {

inline constexpr int64_t kChannelBlock = 16;

// x is [N, C, S] plain; out is [N, C/16, S, 16].
void toChannelBlocked(const float* x, float* out, int64_t N, int64_t C, int64_t S);
// The inverse.
void fromChannelBlocked(const float* x, float* out, int64_t N, int64_t C, int64_t S);

}  // namespace dtrain::kernels
