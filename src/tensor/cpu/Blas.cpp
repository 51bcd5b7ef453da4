#include "tensor/cpu/Blas.h"

#include <cblas.h>

#include <atomic>
#include <cstring>

#include "core/Error.h"
#include "core/NameRegistry.h"
#include "core/ThreadPool.h"
#include "tensor/cpu/Onednn.h"

namespace dtrain::kernels {
namespace {

std::atomic<GemmBackend> gBackend{GemmBackend::Auto};

void openblasGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc) {
  if (beta == 0.f) {
    // OpenBLAS clears C for beta = 0 with a scalar loop (sgemm_beta), a visible
    // share of a mid-sized product and much of a small attention tile;
    // memset and beta = 1 (which skips that pass) give the same result.
    for (int64_t i = 0; i < M; ++i) std::memset(C + i * ldc, 0, static_cast<size_t>(N) * sizeof(float));
    beta = 1.f;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

}  // namespace

void setGemmBackend(GemmBackend b) { gBackend.store(b, std::memory_order_relaxed); }
GemmBackend gemmBackend() { return gBackend.load(std::memory_order_relaxed); }

GemmBackend parseGemmBackend(const std::string& name) {
  static const NameRegistry<GemmBackend> backends(
      "GEMM backend", {{"auto", GemmBackend::Auto},
                       {"onednn", GemmBackend::OneDnn},
                       {"openblas", GemmBackend::OpenBlas}});
  return backends.find(name);
}

GemmBackend gemmBackendFor(int64_t M, int64_t N, int64_t K) {
  const GemmBackend b = gemmBackend();
  if (b != GemmBackend::Auto) return b;
  if (onednn::hasAvx512()) return GemmBackend::OneDnn;
  // With several threads, one thread pool for every product: OpenBLAS's
  // pthreads and oneDNN's OpenMP team each spin after their calls, and
  // alternating the two makes them fight for the cores, so a mixed step is
  // slower than either alone. OpenBLAS, which runs small products on the
  // calling thread where oneDNN forks its team;
  // inside dtrain's own parallel loops oneDNN runs on the calling thread
  // alone (Onednn.cpp), so the attention's tiles keep its small-GEMM kernels.
  if (numThreads() > 1) return inParallelRegion() ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
  const bool onednn = K <= kAutoOnednnMaxK && M * N * K <= kAutoOnednnMaxFlops;
  return onednn ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  DTRAIN_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.f) {
    // No product to compute: C = beta * C by hand (beta == 0 must clear NaNs
    // in C, as BLAS does).
    for (int64_t i = 0; i < M; ++i) {
      float* c = C + i * ldc;
      if (beta == 0.f)
        for (int64_t j = 0; j < N; ++j) c[j] = 0.f;
      else if (beta != 1.f)
        for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
    return;
  }
  if (gemmBackendFor(M, N, K) == GemmBackend::OneDnn)
    onednn::gemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    openblasGemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void gemmBatched(bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                 float alpha, const float* A, int64_t lda, int64_t strideA, const float* B,
                 int64_t ldb, int64_t strideB, float beta, float* C, int64_t ldc, int64_t strideC) {
  DTRAIN_CHECK(batch >= 0, "gemmBatched: negative batch ", batch);
  // One product per matrix: each is threaded by its backend, and the batched
  // products of a model (attention heads) are large enough for its kernels.
  for (int64_t i = 0; i < batch; ++i)
    gemm(transA, transB, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta,
         C + i * strideC, ldc);
}

void configureKernels(int threads, GemmBackend backend) {
  setNumThreads(threads);
  setBlasThreads(threads);
  setGemmBackend(backend);
}

void setBlasThreads(int n) {
  openblas_set_num_threads(n < 1 ? 1 : n);
  onednn::setThreads(n);
}

}  // namespace dtrain::kernels
