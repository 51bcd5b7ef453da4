#pragma once
// 16-bit floats as stored bits: IEEE half (fp16) and bfloat16, converted with
// round-to-nearest-even (what a hardware cast does). Used where 16-bit values
// are only moved and summed in fp32 (compressed gradients, comm reductions).
#include <cstdint>
#include <cstring>
#if defined(__clang__) && __clang_major__ < 15
#include <immintrin.h>
#endif

#include "tensor/DType.h"

namespace dtrain {

// clang before 15 has no _Float16 on x86 (the fuzz build, scripts/fuzz.sh):
// F16C's conversions give the same bits (round-to-nearest-even).
#if defined(__clang__) && __clang_major__ < 15
inline uint16_t floatToHalf(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
inline float halfToFloat(uint16_t bits) { return _cvtsh_ss(bits); }
#else
inline uint16_t floatToHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);  // GCC/Clang: round-to-nearest-even
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

inline float halfToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof bits);
  return static_cast<float>(h);
}
#endif

inline uint16_t floatToBf16(float f) {
  // Branch-free, so loops over it vectorize: add 0x7fff plus the lowest kept
  // bit (ties to even) and keep the upper half; a NaN keeps its upper half with
  // the quiet bit set, so rounding cannot carry it into infinity.
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded);
}

inline float bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// n floats times `scale` into 16-bit floats of `dtype` (F16 or BF16), and
// back: one loop per type, so each vectorizes (cast compressors, ZeRO's
// 16-bit reduce-scatter).
inline void narrowTo16(DType dtype, const float* x, float scale, uint16_t* out, int64_t n) {
  if (dtype == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = floatToBf16(x[i] * scale);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = floatToHalf(x[i] * scale);
  }
}

inline void widenFrom16(DType dtype, const uint16_t* x, float* out, int64_t n) {
  if (dtype == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16ToFloat(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = halfToFloat(x[i]);
  }
}

}  // namespace dtrain
