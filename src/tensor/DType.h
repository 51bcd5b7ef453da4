#pragma once
// Element types and devices. Only f32 on CPU has kernels today; the fields exist
// so bf16/f16 and CUDA slot in without changing the Tensor interface.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/Memory.h"

namespace dtrain {

enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8 };

size_t dtypeSize(DType t);
const char* dtypeName(DType t);  // safetensors spelling: "F32", "BF16", ...

// A bfloat16 value by its bits: the upper half of an IEEE float (8 exponent bits,
// 7 mantissa bits). Conversions are in tensor/cpu/Bf16.h.
struct BFloat16 {
  uint16_t bits;
};

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::I32; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::I64; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::U8; }
template <> constexpr DType dtypeOf<BFloat16>() { return DType::BF16; }

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {}; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

}  // namespace dtrain
