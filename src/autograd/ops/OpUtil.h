#pragma once
// Shared helpers for op implementations.
#include <memory>

#include "autograd/Variable.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Elementwise.h"

namespace dtrain::autograd::detail {

// Runs `kernel(out)` for an overwrite-only backward kernel into input i's
// gradient: straight into the target, or through a temporary when the target
// already holds a gradient to add to.
template <typename Kernel>
void writeGrad(GradSink& sink, size_t i, int64_t numel, Kernel&& kernel) {
  GradTarget t = sink.target(i);
  if (!t.accumulate) {
    kernel(t.ptr);
    return;
  }
  Tensor tmp = Tensor::empty({numel});
  kernel(tmp.data<float>());
  kernels::add(t.ptr, tmp.data<float>(), t.ptr, numel);
}

// Writes alpha * src (shaped like input i) into input i's gradient: scaled
// straight into the target, or added to the gradient it already holds.
inline void writeScaled(GradSink& sink, size_t i, float alpha, const float* src, int64_t n) {
  GradTarget t = sink.target(i);
  if (t.accumulate) kernels::axpy(alpha, src, t.ptr, n);
  else kernels::scale(src, alpha, t.ptr, n);
}

inline const Tensor& checkF32(const Variable& v, const char* op, const char* what) {
  DTRAIN_CHECK(v.defined(), op, ": ", what, " is undefined");
  DTRAIN_CHECK(v.data().dtype() == DType::F32, op, ": ", what, " must be f32, got ",
               dtypeName(v.data().dtype()));
  return v.data();
}

// Contiguous f32 data of a variable (copy only when it is a strided view).
inline Tensor contig(const Variable& v, const char* op, const char* what) {
  return checkF32(v, op, what).contiguous();
}

// A variable's f32 data as an op that reads MemoryFormat::ChannelBlocked
// takes it: a blocked tensor as it is, anything else contiguous.
inline Tensor denseData(const Variable& v, const char* op, const char* what) {
  const Tensor& t = checkF32(v, op, what);
  return t.blocked() ? t : t.contiguous();
}

// A bf16 copy of n = numel(shape) fp32 values (what --precision bf16 saves or multiplies).
inline Tensor toBf16(const float* x, const Shape& shape) {
  Tensor out = Tensor::empty(shape, DType::BF16);
  kernels::toBf16(x, out.data<BFloat16>(), out.numel());
  return out;
}

}  // namespace dtrain::autograd::detail
