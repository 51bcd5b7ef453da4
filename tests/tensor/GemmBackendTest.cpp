// Both GEMM backends (oneDNN's matmul and OpenBLAS) against a double-precision
// reference on awkward shapes, every transpose, padded leading dimensions and
// the alpha/beta combinations the models use; the primitive cache; threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/Error.h"
#include "core/ThreadPool.h"
#include "tensor/KernelTestUtil.h"
#include "tensor/cpu/Blas.h"
#include "tensor/cpu/Onednn.h"

using namespace dtrain;
using namespace dtrain::kernels;
using dtrain::testutil::randomVector;

namespace {

struct Product {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
};

// Runs one product on the current backend; returns the largest error relative
// to the reference's scale (sum of |terms|, so cancellation does not inflate it).
double worstError(const Product& p, uint32_t seed) {
  const int64_t lda = (p.ta ? p.M : p.K) + 3, ldb = (p.tb ? p.K : p.N) + 2, ldc = p.N + 1;
  auto A = randomVector((p.ta ? p.K : p.M) * lda, seed);
  auto B = randomVector((p.tb ? p.N : p.K) * ldb, seed + 1);
  auto C = randomVector(p.M * ldc, seed + 2);
  const auto C0 = C;
  gemm(p.ta, p.tb, p.M, p.N, p.K, p.alpha, A.data(), lda, B.data(), ldb, p.beta, C.data(), ldc);
  double worst = 0;
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      double s = 0, scale = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        const double t = double(p.ta ? A[k * lda + i] : A[i * lda + k]) *
                         double(p.tb ? B[j * ldb + k] : B[k * ldb + j]);
        s += t;
        scale += std::abs(t);
      }
      const double ref = p.alpha * s + p.beta * C0[i * ldc + j];
      scale = std::abs(p.alpha) * scale + std::abs(p.beta * C0[i * ldc + j]) + 1e-30;
      worst = std::max(worst, std::abs(C[i * ldc + j] - ref) / scale);
    }
  // The padding between rows of C is never written.
  for (int64_t i = 0; i < p.M; ++i) EXPECT_EQ(C[i * ldc + p.N], C0[i * ldc + p.N]);
  return worst;
}

class GemmBackends : public ::testing::TestWithParam<GemmBackend> {
 protected:
  void SetUp() override { setGemmBackend(GetParam()); }
  void TearDown() override { setGemmBackend(GemmBackend::Auto); }
};

std::string backendName(const ::testing::TestParamInfo<GemmBackend>& info) {
  switch (info.param) {
    case GemmBackend::OneDnn: return "onednn";
    case GemmBackend::OpenBlas: return "openblas";
    default: return "auto";
  }
}

}  // namespace

TEST_P(GemmBackends, MatchDoubleReferenceOnAwkwardShapes) {
  const int64_t sizes[] = {1, 7, 33, 257};
  uint32_t seed = 1;
  for (int64_t M : sizes)
    for (int64_t N : sizes)
      for (int64_t K : {int64_t(1), int64_t(33), int64_t(257)})
        for (int t = 0; t < 4; ++t) {
          // alpha/beta as the models use them: 1/0 (forward), 1/1 (accumulated
          // gradients), a scale with 0 (attention scores), a general pair.
          const Product cases[] = {{bool(t & 1), bool(t & 2), M, N, K, 1.f, 0.f},
                                   {bool(t & 1), bool(t & 2), M, N, K, 1.f, 1.f},
                                   {bool(t & 1), bool(t & 2), M, N, K, 0.125f, 0.f},
                                   {bool(t & 1), bool(t & 2), M, N, K, -0.7f, 0.3f}};
          for (const Product& p : cases) {
            const double err = worstError(p, seed++);
            // fp32 accumulation: error grows like K * 2^-24 at worst.
            ASSERT_LE(err, 1e-6 * (1 + K / 16.0))
                << "M=" << M << " N=" << N << " K=" << K << " transA=" << p.ta
                << " transB=" << p.tb << " alpha=" << p.alpha << " beta=" << p.beta;
          }
        }
}

TEST_P(GemmBackends, BetaZeroOverwritesNaN) {
  // beta = 0 must ignore C's contents entirely, NaN included (BLAS semantics),
  // for gradients written into fresh, uninitialized buffers.
  const int64_t M = 5, N = 9, K = 3;
  auto A = randomVector(M * K, 7), B = randomVector(K * N, 8);
  std::vector<float> C(M * N, std::numeric_limits<float>::quiet_NaN());
  gemm(false, false, M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C.data(), N);
  for (float c : C) ASSERT_FALSE(std::isnan(c));
}

INSTANTIATE_TEST_SUITE_P(, GemmBackends,
                         ::testing::Values(GemmBackend::OneDnn, GemmBackend::OpenBlas,
                                           GemmBackend::Auto),
                         backendName);

TEST(OnednnGemm, PrimitivesAreCachedPerShape) {
  setGemmBackend(GemmBackend::OneDnn);
  std::thread t([] {  // a fresh thread has an empty cache
    auto A = randomVector(6 * 5, 1), B = randomVector(5 * 4, 2);
    std::vector<float> C(6 * 4);
    for (int i = 0; i < 3; ++i) gemm(false, false, 6, 4, 5, 1.f, A.data(), 5, B.data(), 4, 0.f, C.data(), 4);
    EXPECT_EQ(onednn::cachedPrimitives(), 1u);
    gemm(false, false, 6, 4, 5, 1.f, A.data(), 5, B.data(), 4, 1.f, C.data(), 4);  // beta differs
    gemm(false, false, 3, 4, 5, 1.f, A.data(), 5, B.data(), 4, 0.f, C.data(), 4);  // M differs
    EXPECT_EQ(onednn::cachedPrimitives(), 3u);
  });
  t.join();
  setGemmBackend(GemmBackend::Auto);
}

TEST(OnednnGemm, ConcurrentThreadsWithTheirOwnThreadCounts) {
  // Ranks that are threads of one process each run products at once; every
  // thread must get the single-threaded result exactly (same kernel, same order).
  setGemmBackend(GemmBackend::OneDnn);
  const int64_t M = 96, N = 80, K = 200;
  auto A = randomVector(M * K, 3), B = randomVector(K * N, 4);
  std::vector<float> expected(M * N);
  gemm(false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, expected.data(), N);
  std::vector<std::vector<float>> got(4, std::vector<float>(M * N));
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      for (int i = 0; i < 20; ++i)
        gemm(false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, got[r].data(), N);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], expected) << "thread " << r;
  setGemmBackend(GemmBackend::Auto);
}

TEST(GemmBackend, ParseNamesAndAutoRule) {
  EXPECT_EQ(parseGemmBackend("onednn"), GemmBackend::OneDnn);
  EXPECT_EQ(parseGemmBackend("openblas"), GemmBackend::OpenBlas);
  EXPECT_EQ(parseGemmBackend("auto"), GemmBackend::Auto);
  try {
    parseGemmBackend("mkl");
    FAIL() << "an unknown backend was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("known: auto, onednn, openblas"), std::string::npos);
  }
  setGemmBackend(GemmBackend::Auto);
  EXPECT_EQ(gemmBackendFor(64, 64, 64), GemmBackend::OneDnn);  // small: oneDNN everywhere
  const GemmBackend expectedLong = onednn::hasAvx512() ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
  EXPECT_EQ(gemmBackendFor(128, 512, 2048), expectedLong);  // a long reduction (gpt's dW)
  EXPECT_EQ(gemmBackendFor(4096, 4096, 1024), expectedLong);  // a large product
  // Several threads: one thread pool for every product (OpenBLAS's on AVX2),
  // oneDNN on the calling thread inside dtrain's parallel loops.
  setNumThreads(2);
  const GemmBackend many = onednn::hasAvx512() ? GemmBackend::OneDnn : GemmBackend::OpenBlas;
  EXPECT_EQ(gemmBackendFor(64, 64, 64), many);
  EXPECT_EQ(gemmBackendFor(128, 512, 2048), many);
  std::vector<int> inside(2, -1);
  parallelFor(0, 2, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) inside[i] = static_cast<int>(gemmBackendFor(64, 64, 64));
  });
  for (int b : inside) EXPECT_EQ(b, static_cast<int>(GemmBackend::OneDnn));
  setNumThreads(1);
  EXPECT_EQ(gemmBackendFor(128, 512, 2048), expectedLong);
  setGemmBackend(GemmBackend::OpenBlas);
  EXPECT_EQ(gemmBackendFor(64, 64, 64), GemmBackend::OpenBlas);
  setGemmBackend(GemmBackend::Auto);
}
