// bfloat16 conversions and bf16 GEMM (native oneDNN where the CPU has it, the
// widening fallback everywhere) against a double reference on the rounded inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/KernelTestUtil.h"
#include "tensor/cpu/Bf16.h"
#include "tensor/cpu/Blas.h"

using namespace dtrain;
using namespace dtrain::kernels;
using dtrain::testutil::randomVector;

namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t bf16Bits(float f) {
  BFloat16 b;
  toBf16(&f, &b, 1);
  return b.bits;
}

std::vector<BFloat16> rounded(const std::vector<float>& x) {
  std::vector<BFloat16> out(x.size());
  toBf16(x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

}  // namespace

TEST(Bf16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(bf16Bits(1.f), 0x3f80);
  EXPECT_EQ(bf16Bits(-2.f), 0xc000);
  EXPECT_EQ(bf16Bits(fromBits(0x3f808000)), 0x3f80);  // tie, even below: down
  EXPECT_EQ(bf16Bits(fromBits(0x3f818000)), 0x3f82);  // tie, odd below: up to even
  EXPECT_EQ(bf16Bits(fromBits(0x3f808001)), 0x3f81);  // above the tie: up
  EXPECT_EQ(bf16Bits(fromBits(0x3f807fff)), 0x3f80);  // below the tie: down
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16Bits(fromBits(0x7f7fffff)), 0x7f80);  // the largest float rounds to inf
  EXPECT_EQ(bf16Bits(fromBits(0x00000001)), 0x0000);  // denormals round like any value
  // A NaN whose payload sits only in the dropped bits stays a NaN (not inf).
  const uint16_t nan = bf16Bits(fromBits(0x7f800001));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
}

TEST(Bf16, RoundTripKeepsEightSignificantBits) {
  auto x = randomVector(1000, 5, -100.f, 100.f);
  std::vector<float> back(x.size());
  const auto b = rounded(x);
  fromBf16(b.data(), back.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::abs(back[i] - x[i]), std::abs(x[i]) * 0x1p-8f) << i;
    EXPECT_EQ(bf16Bits(back[i]), b[i].bits);  // representable values are kept exactly
  }
}

TEST(Bf16, GemmMatchesDoubleReferenceOnRoundedInputs) {
  // Products of bf16 values are exact in fp32, so native and widened products
  // agree with the double reference to fp32 accumulation error.
  for (GemmBackend backend : {GemmBackend::Auto, GemmBackend::OpenBlas}) {
    setGemmBackend(backend);  // openblas forces the widening fallback
    for (int64_t M : {1, 7, 33})
      for (int64_t N : {1, 17, 65})
        for (int64_t K : {1, 33, 257})
          for (int t = 0; t < 4; ++t) {
            const bool ta = t & 1, tb = t & 2;
            const int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N;
            // Exact lengths: the last row of an operand ends at its last element.
            const int64_t spanA = ((ta ? K : M) - 1) * lda + (ta ? M : K);
            const int64_t spanB = ((tb ? N : K) - 1) * ldb + (tb ? K : N);
            const auto A = rounded(randomVector(spanA, 1)), B = rounded(randomVector(spanB, 2));
            auto C = randomVector(M * ldc, 3);
            const auto C0 = C;
            gemmBf16(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 1.f, C.data(), ldc);
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) {
                double s = 0, scale = 0;
                for (int64_t k = 0; k < K; ++k) {
                  const double p = double(bf16ToFloat(ta ? A[k * lda + i] : A[i * lda + k])) *
                                   bf16ToFloat(tb ? B[j * ldb + k] : B[k * ldb + j]);
                  s += p;
                  scale += std::abs(p);
                }
                const double ref = 0.5 * s + C0[i * ldc + j];
                ASSERT_NEAR(C[i * ldc + j], ref, 1e-6 * (1 + K / 16.0) * (scale + 1))
                    << "M=" << M << " N=" << N << " K=" << K << " t=" << t;
              }
          }
  }
  setGemmBackend(GemmBackend::Auto);
}
