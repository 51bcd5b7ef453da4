#pragma once
// Vectorized elementwise kernels on contiguous f32 arrays of n elements.
// Output pointers may alias inputs unless said otherwise. Large n is split with
// dtrain::parallelFor.
#include <cstdint>

#include "tensor/DType.h"

namespace dtrain::kernels {

void add(const float* a, const float* b, float* out, int64_t n);
void sub(const float* a, const float* b, float* out, int64_t n);
void mul(const float* a, const float* b, float* out, int64_t n);
void scale(const float* x, float alpha, float* out, int64_t n);          // out = alpha*x
void axpy(float alpha, const float* x, float* y, int64_t n);             // y += alpha*x

// Activations. Backward kernels compute gx = gy * f'(...) and OVERWRITE gx.
void relu(const float* x, float* y, int64_t n);
void reluBackward(const float* y, const float* gy, float* gx, int64_t n);  // y = relu output
void sigmoid(const float* x, float* y, int64_t n);
void sigmoidBackward(const float* y, const float* gy, float* gx, int64_t n);
void tanh(const float* x, float* y, int64_t n);
void tanhBackward(const float* y, const float* gy, float* gx, int64_t n);
void gelu(const float* x, float* y, int64_t n);  // exact (erf) form, as torch default
void geluBackward(const float* x, const float* gy, float* gx, int64_t n);  // x = gelu input
// Training form: y = gelu(x) and its derivative dydx in one pass, so the backward
// is gx = gy * dydx (a multiply) instead of a second erf and exp per element.
void geluWithDerivative(const float* x, float* y, float* dydx, int64_t n);
// The same with the derivative rounded to bf16 (what a bf16 run saves for backward).
void geluWithDerivativeBf16(const float* x, float* y, BFloat16* dydx, int64_t n);

// y[r, c] = row[c]: a [rows, cols] matrix of copies of one row.
void fillRows(float* y, const float* row, int64_t rows, int64_t cols);
// Column sums of [rows, cols]: out[c] (+)= sum_r x[r, c]. accumulate=false overwrites.
void sumRows(const float* x, float* out, int64_t rows, int64_t cols, bool accumulate);

}  // namespace dtrain::kernels
