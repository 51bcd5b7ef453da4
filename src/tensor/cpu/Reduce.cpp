#include "tensor/cpu/Reduce.h"

#include <cmath>
#include <limits>

namespace dtrain::kernels {
namespace {

// Sums blocks of floats in float lanes (vectorized), then folds each block into a
// double: a block is short enough that float rounding stays ~1e-7 relative, and
// the double total keeps long sums accurate.
constexpr int64_t kBlock = 256;

template <typename F>
double blockedSum(const float* x, int64_t n, F f) {
  double total = 0.0;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    float part[16] = {};
    const float* __restrict p = x + i;
    for (int64_t j = 0; j < kBlock; j += 16)
      for (int k = 0; k < 16; ++k) part[k] += f(p[j + k]);
    double b = 0.0;
    for (int k = 0; k < 16; ++k) b += part[k];
    total += b;
  }
  for (; i < n; ++i) total += static_cast<double>(f(x[i]));
  return total;
}

}  // namespace

double sum(const float* x, int64_t n) {
  return blockedSum(x, n, [](float v) { return v; });
}

void argmaxRows(const float* x, int64_t rows, int64_t cols, int32_t* out) {
  // First maximum wins (as torch.argmax); a NaN counts as the maximum.
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    int32_t best = 0;
    float bv = cols > 0 ? xr[0] : 0.f;
    for (int64_t c = 1; c < cols && bv == bv; ++c) {
      if (xr[c] > bv || xr[c] != xr[c]) {
        bv = xr[c];
        best = static_cast<int32_t>(c);
      }
    }
    out[r] = best;
  }
}

}  // namespace dtrain::kernels
