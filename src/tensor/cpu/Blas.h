#pragma once
// GEMM, row-major:  C = alpha * op(A) * op(B) + beta * C,
// op(A) is [M, K], op(B) is [K, N], C is [M, N]; lda/ldb/ldc are row strides.
// Runs on oneDNN's matmul (Onednn.h) or OpenBLAS (cblas), chosen per product by
// the process-wide GemmBackend (bench/GemmBench.cpp times both on the models' products).
#include <cstdint>
#include <string>

namespace dtrain::kernels {

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// `batch` independent GEMMs; operand i starts at A + i*strideA (B, C likewise).
void gemmBatched(bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                 float alpha, const float* A, int64_t lda, int64_t strideA, const float* B,
                 int64_t ldb, int64_t strideB, float beta, float* C, int64_t ldc, int64_t strideC);

enum class GemmBackend { Auto, OneDnn, OpenBlas };

// Auto: oneDNN on CPUs with AVX-512 (twice OpenBLAS's speed there). On AVX2-only
// CPUs the two are close on the models' products except long reductions, where
// oneDNN falls clearly behind OpenBLAS (gpt's dW at K = 2048, large squares):
// there OpenBLAS runs the products with K > kAutoOnednnMaxK or more than
// kAutoOnednnMaxFlops multiply-adds (bench/GemmBench.cpp measures both), with
// one thread. With more threads every product runs on OpenBLAS (two libraries'
// thread pools alternating fight for the cores), except inside dtrain's own
// parallel loops, where oneDNN runs on the calling thread alone.
void setGemmBackend(GemmBackend b);
GemmBackend gemmBackend();
// "auto", "onednn", "openblas"; throws UsageError naming the choices otherwise.
GemmBackend parseGemmBackend(const std::string& name);
// The backend a product of this size runs on under the current setting.
GemmBackend gemmBackendFor(int64_t M, int64_t N, int64_t K);
inline constexpr int64_t kAutoOnednnMaxK = 1024;
inline constexpr int64_t kAutoOnednnMaxFlops = int64_t(1) << 30;

// The compute settings of a run, in one call: threads of dtrain's own kernels
// (core/ThreadPool.h), of OpenBLAS and of oneDNN, and the GEMM backend.
void configureKernels(int threads, GemmBackend backend);

// Threads OpenBLAS and oneDNN may use (follows dtrain::setNumThreads).
void setBlasThreads(int n);

}  // namespace dtrain::kernels
