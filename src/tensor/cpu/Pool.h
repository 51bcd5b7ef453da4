#pragma once
// 2-d max and average pooling over NCHW f32 tensors (no padding-count tricks:
// average divides by the full window, as torch's default count_include_pad=True).
#include <cstdint>

namespace dtrain::kernels {

struct PoolShape {
  int64_t N, C, H, W;
  int64_t KH, KW, strideH, strideW, padH = 0, padW = 0;
  int64_t outH() const { return (H + 2 * padH - KH) / strideH + 1; }
  int64_t outW() const { return (W + 2 * padW - KW) / strideW + 1; }
};

// y and argmax ([N, C, outH, outW]; argmax holds the flat h*W+w input index).
void maxPool2dForward(const PoolShape& s, const float* x, float* y, int32_t* argmax);
// gx is OVERWRITTEN (zeroed, then scattered).
void maxPool2dBackward(const PoolShape& s, const float* gy, const int32_t* argmax, float* gx);
void avgPool2dForward(const PoolShape& s, const float* x, float* y);
void avgPool2dBackward(const PoolShape& s, const float* gy, float* gx);

// Global average pooling of x channel-blocked ([N, C/16, S, 16], Blocked.h)
// into plain y [N, C], summed in the order avgPool2dForward sums (the same
// bits); the backward spreads gy / S over gx, blocked.
void globalAvgPoolBlocked(const float* x, float* y, int64_t N, int64_t C, int64_t S);
void globalAvgPoolBackwardBlocked(const float* gy, float* gx, int64_t N, int64_t C, int64_t S);

}  // namespace dtrain::kernels
