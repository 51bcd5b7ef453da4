#pragma once
// GEMM through OpenBLAS (cblas), row-major:  C = alpha * op(A) * op(B) + beta * C,
// op(A) is [M, K], op(B) is [K, N], C is [M, N]; lda/ldb/ldc are row strides.
#include <cstdint>

namespace dtrain::kernels {

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// `batch` independent GEMMs; operand i starts at A + i*strideA (B, C likewise).
void gemmBatched(bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                 float alpha, const float* A, int64_t lda, int64_t strideA, const float* B,
                 int64_t ldb, int64_t strideB, float beta, float* C, int64_t ldc, int64_t strideC);

// Threads OpenBLAS may use (follows dtrain::setNumThreads).
void setBlasThreads(int n);

}  // namespace dtrain::kernels
