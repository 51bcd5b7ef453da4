#pragma once
// Branch-free float approximations written so that GCC vectorizes loops calling
// them (std::exp/std::tanh are scalar library calls without -ffast-math). The
// selects between their branch-free pieces become vector blends only under
// -fno-trapping-math (set on the tensor target): with trapping math GCC keeps a
// branch around the pieces it may not evaluate speculatively.
// Internal to the CPU kernels.
#include <bit>
#include <cstdint>

namespace dtrain::kernels::detail {

// exp(x) with ~1 ulp error on [-87.3, 88.7]; below -87.3 it returns 0 (well, a
// denormal-free tiny value is not needed by any caller), above it saturates to +inf.
// NaN propagates. Cephes-style: 2^n * p(r), r = x - n ln2 in two parts.
inline float fastExp(float x) {
  const float hi = 88.7228f, lo = -87.3365f;
  float xc = x < lo ? lo : (x > hi ? hi : x);
  // Round-to-nearest of x*log2(e) through the 1.5*2^23 trick (no lrint call).
  const float shifter = 12582912.0f;
  float t = xc * 1.44269504088896341f + shifter;
  float n = t - shifter;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.f;
  // 2^n: n in [-126, 128]; build the exponent bits of 2^(n/2) twice so n = 128
  // (x near 88.7) does not overflow the exponent field.
  int32_t ni = static_cast<int32_t>(n);
  int32_t h = ni >> 1;
  float s1 = std::bit_cast<float>((h + 127) << 23);
  float s2 = std::bit_cast<float>((ni - h + 127) << 23);
  float y = p * s1 * s2;
  y = x > hi ? __builtin_inff() : y;
  y = x < lo ? 0.f : y;
  return x != x ? x : y;
}

inline float fastSigmoid(float x) { return 1.f / (1.f + fastExp(-x)); }

// tanh: odd polynomial near 0 (where 1 - 2/(e^2x + 1) cancels), exp form elsewhere.
inline float fastTanh(float x) {
  float a = x < 0.f ? -x : x;
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  float e = fastExp(2.f * (a > 10.f ? 10.f : a));  // rounds to exactly 1 from here
  float big = 1.f - 2.f / (e + 1.f);
  big = x < 0.f ? -big : big;
  float y = a < 0.625f ? small : big;
  return x != x ? x : y;
}

// erf(x) with < 1e-7 relative error (about 1 ulp, as std::erf for float). Two
// branch-free pieces selected at |x| = 0.9277: an odd polynomial near 0, and
// 1 - exp(poly(|x|)) beyond, where erf approaches 1 and the exp form keeps its
// relative accuracy. Minimax coefficients by Norbert Juffa ("erff", max 0.99 ulp).
inline float fastErf(float x) {
  const float a = x < 0.f ? -x : x, s = x * x;
  float r = -1.72853470e-5f * a + 3.83197126e-4f;
  const float u = -3.88396438e-3f * a + 2.42546219e-2f;
  r = r * s + u;
  r = r * a - 1.06777877e-1f;
  r = r * a - 6.34846687e-1f;
  r = r * a - 1.28717512e-1f;
  r = r * a - a;
  float big = 1.f - fastExp(r);
  big = x < 0.f ? -big : big;
  float p = -5.96761703e-4f;
  p = p * s + 4.99119423e-3f;
  p = p * s - 2.67681349e-2f;
  p = p * s + 1.12819925e-1f;
  p = p * s - 3.76125336e-1f;
  p = p * s + 1.28379166e-1f;
  const float small = p * x + x;
  return a > 0.927734375f ? big : small;  // NaN: a > .. is false, small is NaN
}

}  // namespace dtrain::kernels::detail
