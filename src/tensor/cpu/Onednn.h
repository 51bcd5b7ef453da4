#pragma once
// GEMM on oneDNN's matmul primitive (Debian's libdnnl, OpenMP threading).
// Same contract as kernels::gemm (Blas.h): row-major C = alpha*op(A)*op(B) + beta*C.
// Callers go through kernels::gemm, which picks this or OpenBLAS per product.
#include <cstddef>
#include <cstdint>

namespace dtrain::kernels::onednn {

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The same with bf16 operands (raw bits) and an fp32 C, accumulated in fp32.
// Only where supportsBf16().
void gemmBf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const void* A, int64_t lda, const void* B, int64_t ldb, float beta, float* C,
              int64_t ldc);
// oneDNN has bf16 matmul kernels for this CPU (it needs AVX-512; AVX512-BF16
// runs them natively). Decided once, by creating a small primitive.
bool supportsBf16();

// Threads oneDNN may use in each calling thread (OpenMP's thread count is a
// per-thread setting, so every rank thread picks it up on its next product).
void setThreads(int n);

// True where the CPU has AVX-512 (oneDNN's avx512_core kernels are dispatched).
bool hasAvx512();

// Primitives this thread holds in its cache (for tests: one per distinct shape).
size_t cachedPrimitives();

}  // namespace dtrain::kernels::onednn
