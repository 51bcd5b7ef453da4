#include "comm/detail/ReduceKernels.h"

#include <algorithm>
#include <cstdint>

#include "core/Error.h"
#include "tensor/Half.h"

namespace dtrain::comm::detail {
namespace {

template <typename T, typename F>
void apply2(T* dst, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T>
void reduce2T(T* dst, const T* a, const T* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: apply2(dst, a, b, n, [](T x, T y) { return static_cast<T>(x + y); }); break;
    case ReduceOp::Min: apply2(dst, a, b, n, [](T x, T y) { return y < x ? y : x; }); break;
    case ReduceOp::Max: apply2(dst, a, b, n, [](T x, T y) { return x < y ? y : x; }); break;
  }
}

template <typename T>
void dispatchScale(T* p, size_t n, int k) {
  if constexpr (std::is_floating_point_v<T>) {
    const T s = T(1) / static_cast<T>(k);
    for (size_t i = 0; i < n; ++i) p[i] *= s;
  } else {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / k);
  }
}

// 16-bit floats (compressed gradients): each element is widened, combined in
// fp32 and rounded back once, so a sum of N values rounds N-1 times (once per
// hop), as NCCL's and Gloo's fp16 sums do.
template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
void reduce2Half(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      apply2(dst, a, b, n, [](uint16_t x, uint16_t y) { return Narrow(Widen(x) + Widen(y)); });
      break;
    case ReduceOp::Min:
      apply2(dst, a, b, n, [](uint16_t x, uint16_t y) { return Widen(y) < Widen(x) ? y : x; });
      break;
    case ReduceOp::Max:
      apply2(dst, a, b, n, [](uint16_t x, uint16_t y) { return Widen(x) < Widen(y) ? y : x; });
      break;
  }
}

template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
void scaleHalf(uint16_t* p, size_t n, int k) {
  const float s = 1.0f / static_cast<float>(k);
  for (size_t i = 0; i < n; ++i) p[i] = Narrow(Widen(p[i]) * s);
}

}  // namespace

void checkReducible(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::I32: case DType::I64:
    case DType::U8: return;
    default:
      throw Error(dtrain::detail::concat("comm: reduction '", reduceOpName(op),
                                         "' is not implemented for dtype ", dtypeName(dtype)));
  }
}

void reduce2(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::F32:
      return reduce2T(static_cast<float*>(dst), static_cast<const float*>(a),
                      static_cast<const float*>(b), count, op);
    case DType::I32:
      return reduce2T(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a),
                      static_cast<const int32_t*>(b), count, op);
    case DType::I64:
      return reduce2T(static_cast<int64_t*>(dst), static_cast<const int64_t*>(a),
                      static_cast<const int64_t*>(b), count, op);
    case DType::U8:
      return reduce2T(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                      static_cast<const uint8_t*>(b), count, op);
    case DType::F16:
      return reduce2Half<floatToHalf, halfToFloat>(static_cast<uint16_t*>(dst),
                                                    static_cast<const uint16_t*>(a),
                                                    static_cast<const uint16_t*>(b), count, op);
    case DType::BF16:
      return reduce2Half<floatToBf16, bf16ToFloat>(static_cast<uint16_t*>(dst),
                                                    static_cast<const uint16_t*>(a),
                                                    static_cast<const uint16_t*>(b), count, op);
    default: checkReducible(dtype, op);
  }
}

void reduceInto(void* dst, const void* src, size_t count, DType dtype, ReduceOp op) {
  reduce2(dst, dst, src, count, dtype, op);
}

void reduceMany(void* dst, const void* const* srcs, int n, size_t count, DType dtype,
                ReduceOp op) {
  const size_t es = dtypeSize(dtype);
  if (n == 1) {
    if (dst != srcs[0] && count) std::copy_n(static_cast<const char*>(srcs[0]), count * es,
                                             static_cast<char*>(dst));
    return;
  }
  // 8 KiB blocks: dst block stays in L1 across the n-1 passes.
  const size_t block = std::max<size_t>(1, 8192 / es);
  for (size_t lo = 0; lo < count; lo += block) {
    size_t len = std::min(block, count - lo);
    char* d = static_cast<char*>(dst) + lo * es;
    reduce2(d, static_cast<const char*>(srcs[0]) + lo * es,
            static_cast<const char*>(srcs[1]) + lo * es, len, dtype, op);
    for (int k = 2; k < n; ++k)
      reduce2(d, d, static_cast<const char*>(srcs[k]) + lo * es, len, dtype, op);
  }
}

void scaleForAvg(void* data, size_t count, DType dtype, int n) {
  if (n == 1) return;
  switch (dtype) {
    case DType::F32: return dispatchScale(static_cast<float*>(data), count, n);
    case DType::I32: return dispatchScale(static_cast<int32_t*>(data), count, n);
    case DType::I64: return dispatchScale(static_cast<int64_t*>(data), count, n);
    case DType::U8: return dispatchScale(static_cast<uint8_t*>(data), count, n);
    case DType::F16: return scaleHalf<floatToHalf, halfToFloat>(static_cast<uint16_t*>(data), count, n);
    case DType::BF16: return scaleHalf<floatToBf16, bf16ToFloat>(static_cast<uint16_t*>(data), count, n);
    default: checkReducible(dtype, ReduceOp::Avg);
  }
}

}  // namespace dtrain::comm::detail
