#include "tensor/DType.h"

#include "core/Error.h"

namespace dtrain {

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}

const char* dtypeName(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

std::string Device::str() const {
  return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace dtrain
