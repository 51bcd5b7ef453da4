#pragma once
// im2col and its adjoint for one image (internal to the convolution kernels).
#include <cstdint>

#include "tensor/cpu/Conv.h"

namespace dtrain::kernels::detail {

// col[k, p] (row stride ldc) = x[ci, oh*sh - ph + kh, ow*sw - pw + kw], or 0 in
// the padding, for k = (ci, kh, kw) and p = oh*OW + ow. x is one [Cin, H, W] image.
void im2col(const ConvShape& s, const float* x, float* col, int64_t ldc);

// The adjoint: gx[ci, ih, iw] = sum of the col entries x[ci, ih, iw] was copied
// to. gx (one image) is overwritten.
void col2im(const ConvShape& s, const float* col, int64_t ldc, float* gx);

}  // namespace dtrain::kernels::detail
