#pragma once
// 2-d convolutions on oneDNN's convolution primitives, in dtrain's layouts
// (Conv.h): NCHW activations, [Cout, Cin, KH, KW] weights, fp32 outputs that
// are overwritten. Operands are fp32, or bf16 (raw bits, only where
// supportsBf16()) multiplied with fp32 accumulation. Callers go through
// ConvDispatch.h, which picks this or dtrain's own kernels per layer and pass.
#include <cstddef>

#include "tensor/cpu/Conv.h"

namespace dtrain::kernels::onednn {

// y = conv(x, w) + bias (bias may be null). `layout` (fp32 only) says which
// activations are channel-blocked (nChw16c): where the primitive chose that
// layout too, they are read and written in place, with no reorder.
void convForward(const ConvShape& s, bool bf16, const void* x, const void* w, const float* bias,
                 float* y, ConvLayout layout = {});
// gx from gy and w.
void convBackwardData(const ConvShape& s, bool bf16, const void* gy, const void* w, float* gx,
                      ConvLayout layout = {});
// gw and (unless null) gbias from x and gy.
void convBackwardWeights(const ConvShape& s, bool bf16, const void* x, const void* gy, float* gw,
                         float* gbias, ConvLayout layout = {});

// Packed operands (bf16 only): an activation x (Src) or output gradient gy
// (DiffDst) converted from fp32 NCHW straight into the blocked bf16 layout
// oneDNN's forward (x) or backward-data (gy) primitive of s chose, one pass
// that both rounds and reorders. The plain path above rounds into a bf16 copy
// and then reorders that copy once per use: x for the forward and again for
// the weight gradient, gy for each backward pass. packedBytes() may exceed the
// plain bf16 size where the blocks pad the channels.
enum class Packed { Src, DiffDst };
size_t packedBytes(const ConvShape& s, Packed which);
void pack(const ConvShape& s, Packed which, const float* plain, void* packed);
// As above, with x and gy packed (w stays plain bf16).
void convForwardPacked(const ConvShape& s, const void* x, const void* w, const float* bias,
                       float* y);
void convBackwardDataPacked(const ConvShape& s, const void* gy, const void* w, float* gx);
void convBackwardWeightsPacked(const ConvShape& s, const void* x, const void* gy, float* gw,
                               float* gbias);

// Convolution primitives this thread holds in its cache (for tests: one per
// shape, pass, precision and bias).
size_t cachedConvPrimitives();

}  // namespace dtrain::kernels::onednn
