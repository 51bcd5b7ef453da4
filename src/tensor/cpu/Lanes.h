#pragma once
// Row reductions that GCC vectorizes without -ffast-math (internal to the CPU
// kernels). A float reduction is only vectorized when the source keeps its lanes
// apart, so sums run in 16 partial sums folded at the end: the rounding differs
// from a sequential sum by the usual ~1e-7 relative, fine for rows of up to a
// few thousand elements (long sums belong in Reduce.h's blocked double sums).
#include <cstdint>
#include <cstring>
#include <limits>

namespace dtrain::kernels::detail {

inline constexpr int kLanes = 16;

// sum over i in [0, n) of f(i).
template <typename F>
inline float laneSum(int64_t n, F&& f) {
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) part[k] += f(i + k);
  float s = 0.f;
  for (; i < n; ++i) s += f(i);
  for (float p : part) s += p;
  return s;
}

inline float laneDot(const float* a, const float* b, int64_t n) {
  return laneSum(n, [=](int64_t i) { return a[i] * b[i]; });
}

// Max of x[0, n) (-inf when empty; NaNs are ignored unless all are NaN). A max
// reduction is not vectorized even with separate lanes (it needs
// -ffinite-math-only), so eight lanes go through a GCC vector-extension type.
inline float laneMax(const float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  using Vec8 = float __attribute__((vector_size(32)));
  Vec8 acc = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Vec8 v;
    std::memcpy(&v, x + i, sizeof v);
    acc = v > acc ? v : acc;
  }
  float m = kNegInf;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int k = 0; k < 8; ++k) m = acc[k] > m ? acc[k] : m;
  return m;
}

}  // namespace dtrain::kernels::detail
