#pragma once
// 2-d convolutions on oneDNN's convolution primitives, in dtrain's layouts
// (Conv.h): NCHW activations, [Cout, Cin, KH, KW] weights, fp32 outputs that
// are overwritten. Operands are fp32, or bf16 (raw bits, only where
// supportsBf16()) multiplied with fp32 accumulation. Callers go through
// ConvDispatch.h, which picks this or dtrain's own kernels per layer and pass.
#include <cstddef>

#include "tensor/cpu/Conv.h"

namespace dtrain::kernels::onednn {

// y = conv(x, w) + bias (bias may be null).
void convForward(const ConvShape& s, bool bf16, const void* x, const void* w, const float* bias,
                 float* y);
// gx from gy and w.
void convBackwardData(const ConvShape& s, bool bf16, const void* gy, const void* w, float* gx);
// gw and (unless null) gbias from x and gy.
void convBackwardWeights(const ConvShape& s, bool bf16, const void* x, const void* gy, float* gw,
                         float* gbias);

// Convolution primitives this thread holds in its cache (for tests: one per
// shape, pass, precision and bias).
size_t cachedConvPrimitives();

}  // namespace dtrain::kernels::onednn
