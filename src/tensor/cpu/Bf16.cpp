#include "tensor/cpu/Bf16.h"

#include <vector>

#include "tensor/cpu/Blas.h"
#include "tensor/cpu/Onednn.h"
#include "tensor/cpu/Parallel.h"

namespace dtrain::kernels {

// Over the thread team like the elementwise kernels: a serial conversion with
// 2 threads is slower than on 1, the team's other thread spinning beside it
// on the core the conversion needs.
void toBf16(const float* x, BFloat16* y, int64_t n) {
  detail::forRange(n, detail::kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i].bits = floatToBf16(x[i]);
  });
}

void fromBf16(const BFloat16* x, float* y, int64_t n) {
  detail::forRange(n, detail::kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = bf16ToFloat(x[i]);
  });
}

void mulBf16(const BFloat16* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16ToFloat(a[i]) * b[i];
}

bool nativeBf16Gemm() {
  return gemmBackend() != GemmBackend::OpenBlas && onednn::supportsBf16();
}

void gemmBf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K > 0 && nativeBf16Gemm()) {
    onednn::gemmBf16(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Widen the stored rows (ld-strided, the last one only as long as it is) to
  // fp32 and run the fp32 product.
  thread_local std::vector<float> wideA, wideB;
  const int64_t spanA = (transA ? K - 1 : M - 1) * lda + (transA ? M : K);
  const int64_t spanB = (transB ? N - 1 : K - 1) * ldb + (transB ? K : N);
  if (K > 0) {
    wideA.resize(static_cast<size_t>(spanA));
    wideB.resize(static_cast<size_t>(spanB));
    fromBf16(A, wideA.data(), spanA);
    fromBf16(B, wideB.data(), spanB);
  }
  gemm(transA, transB, M, N, K, alpha, wideA.data(), lda, wideB.data(), ldb, beta, C, ldc);
}

}  // namespace dtrain::kernels
