#pragma once
// 2-d convolution (cross-correlation, as torch.nn.Conv2d) over NCHW f32 tensors.
// Weight layout [Cout, Cin, KH, KW]; no groups or dilation. dtrain's own kernels:
// autograd goes through ConvDispatch.h, which runs these or oneDNN's per layer.
#include <cstdint>
#include <vector>

namespace dtrain::kernels {

struct ConvShape {
  int64_t N, Cin, H, W;      // input
  int64_t Cout, KH, KW;      // kernel
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0;
  int64_t outH() const { return (H + 2 * padH - KH) / strideH + 1; }
  int64_t outW() const { return (W + 2 * padW - KW) / strideW + 1; }
};

// Which activations of an fp32 convolution are in MemoryFormat::ChannelBlocked
// (Tensor.h, Blocked.h) rather than plain NCHW: x (and so gx) and y (and gy).
struct ConvLayout {
  bool x = false, y = false;
};

// y[N, Cout, outH, outW] = conv(x, w) + bias (bias may be null).
void conv2dForward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y);
// From gy: gx (may be null: not needed), gw and gbias (may be null). gx/gw/gbias
// are OVERWRITTEN (the caller accumulates if needed).
void conv2dBackward(const ConvShape& s, const float* x, const float* w, const float* gy, float* gx,
                    float* gw, float* gbias);

}  // namespace dtrain::kernels
