#pragma once
// 2-d convolution as autograd's conv2d runs it: each layer shape, pass and
// precision on dtrain's own kernels (Conv.h) or oneDNN's primitives
// (OnednnConv.h), whichever bench/ConvBench.cpp measured faster
// (docs/PERFORMANCE.md, "Convolutions: dtrain's kernels vs oneDNN").
// Operands are all fp32, or all bf16 (--precision bf16: bf16 copies multiplied
// with fp32 accumulation); outputs are fp32 and overwritten, as in Conv.h.
// Where dtrain's kernels run a bf16 pass they read the operands widened to
// fp32, which gives the same numbers up to summation order (a product of two
// bf16 values is exact in fp32).
#include "tensor/DType.h"
#include "tensor/Half.h"
#include "tensor/cpu/Conv.h"

namespace dtrain::kernels {

enum class ConvPass { Forward, BackwardData, BackwardWeights };  // weights: bias included
enum class ConvImpl { Dtrain, OneDnn };

// `blocked`: fp32 activations in the channel-blocked layout (ConvLayout).
ConvImpl convImplFor(const ConvShape& s, ConvPass pass, bool bf16, bool blocked = false);
// True where an fp32 convolution of s may keep its activations channel-blocked
// (ConvLayout): output channels a multiple of 16, and oneDNN's AVX-512 kernels.
bool convBlockable(const ConvShape& s);
// True where oneDNN has bf16 convolution kernels (AVX-512).
bool onednnConvBf16();

void convolve(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
              ConvLayout layout = {});
void convolve(const ConvShape& s, const BFloat16* x, const BFloat16* w, const float* bias,
              float* y);
// gx, gw, gbias may each be null (not needed).
void convolveBackward(const ConvShape& s, const float* x, const float* w, const float* gy,
                      float* gx, float* gw, float* gbias, ConvLayout layout = {});
void convolveBackward(const ConvShape& s, const BFloat16* x, const BFloat16* w, const BFloat16* gy,
                      float* gx, float* gw, float* gbias);

// --precision bf16 with packed activations (OnednnConv.h's Packed): x and gy
// rounded and reordered into oneDNN's blocked layouts in one pass each, x kept
// packed for the weight gradient, one packed gy for both backward passes.
// Where oneDNN runs all three bf16 passes of s and its blocks pad nothing (a
// packed x kept for backward costs what the plain bf16 copy did); else
// packed() is false and the plain functions above apply.
struct ConvPacking {
  int64_t x = 0, gy = 0;  // bf16 elements of the packed x and gy
  bool packed() const { return x > 0; }
};
ConvPacking convPacking(const ConvShape& s);
void packConvInput(const ConvShape& s, const float* x, BFloat16* out);
void packConvOutputGrad(const ConvShape& s, const float* gy, BFloat16* out);
void convolvePacked(const ConvShape& s, const BFloat16* x, const BFloat16* w, const float* bias,
                    float* y);
// gx, gw, gbias may each be null (not needed).
void convolveBackwardPacked(const ConvShape& s, const BFloat16* x, const BFloat16* w,
                            const BFloat16* gy, float* gx, float* gw, float* gbias);

}  // namespace dtrain::kernels
