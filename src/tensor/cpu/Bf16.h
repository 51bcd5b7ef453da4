#pragma once
// bfloat16 for mixed precision: conversions, and matrix products of bf16
// operands accumulated in fp32. On CPUs where oneDNN has bf16 kernels (AVX-512,
// natively with AVX512-BF16) the products run there; elsewhere the operands are
// widened to fp32 and the product runs on kernels::gemm. Both give the same
// numbers up to summation order: a product of two bf16 values is exact in fp32.
#include <cstdint>

#include "tensor/DType.h"
#include "tensor/Half.h"

namespace dtrain::kernels {

// Round to nearest, ties to even (as the hardware's vcvtneps2bf16); NaN stays NaN.
void toBf16(const float* x, BFloat16* y, int64_t n);
void fromBf16(const BFloat16* x, float* y, int64_t n);
// out[i] = float(a[i]) * b[i] (a backward through a derivative saved in bf16).
void mulBf16(const BFloat16* a, const float* b, float* out, int64_t n);

inline float bf16ToFloat(BFloat16 v) { return dtrain::bf16ToFloat(v.bits); }

// C = alpha * op(A) * op(B) + beta * C, A and B bf16, C fp32 (Blas.h's layout).
void gemmBf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, float beta, float* C,
              int64_t ldc);

// True where gemmBf16 runs on oneDNN's bf16 kernels (and --gemm is not openblas).
bool nativeBf16Gemm();

}  // namespace dtrain::kernels
