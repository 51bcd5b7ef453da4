#pragma once
// Unpacked GEMM micro-kernels for the small, oddly shaped products of
// convolution (M = a few output channels, K = Cin*KH*KW): OpenBLAS spends more
// on packing and dispatch than on arithmetic at these sizes. Row-major, leading
// dimensions in floats. Internal to the CPU kernels.
#include <cstdint>

namespace dtrain::kernels::detail {

// C[M,N] = init + A[M,K] * B[K,N], where init is C itself (accumulate), else
// rowInit[m] broadcast along the row (a bias), else 0. Vectorized along N.
// Row m of A starts at A + aRowOffsets[m] when aRowOffsets is given, else at
// A + m*lda; row k of B likewise (offsets give an implicit im2col: its rows are
// shifted windows of one image).
void gemmBroadcastA(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const int64_t* aRowOffsets, const float* B, int64_t ldb,
                    const int64_t* bRowOffsets, float* C, int64_t ldc, const float* rowInit,
                    bool accumulate);

// C[M,N] += A'[M,K] * B[K,N] with K = segments*segLen, where element
// k = s*segLen + t of row m of A' is A[aRowOffsets[m] + s*segStride + t]: each
// row is a 2-d window of an image (an implicit im2col row, one segment per
// output row), so the matrix is never built.
void gemmWindowA(int64_t M, int64_t N, int64_t segments, int64_t segLen, int64_t segStride,
                 const float* A, const int64_t* aRowOffsets, const float* B, int64_t ldb, float* C,
                 int64_t ldc);

// C[M,N] (+)= A[M,L] * B[N,L]^T: dot products of rows, vectorized along L.
// Suits long L (the summed pixels of a weight gradient). Row j of B starts at
// B + bRowOffsets[j] when bRowOffsets is given, else at B + j*ldb.
void gemmDotRows(int64_t M, int64_t N, int64_t L, const float* A, int64_t lda, const float* B,
                 int64_t ldb, const int64_t* bRowOffsets, float* C, int64_t ldc, bool accumulate);

}  // namespace dtrain::kernels::detail
