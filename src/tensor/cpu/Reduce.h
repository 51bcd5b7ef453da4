#pragma once
// Reductions over contiguous f32 arrays.
#include <cstdint>

namespace dtrain::kernels {

double sum(const float* x, int64_t n);          // accumulated in double for accuracy
// Row-wise argmax of [rows, cols] into out[rows].
void argmaxRows(const float* x, int64_t rows, int64_t cols, int32_t* out);

}  // namespace dtrain::kernels
