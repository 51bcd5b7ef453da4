// Secure aggregation (federated/SecureAggregation.h) and Shamir sharing: the
// unmasked sum is the plain quantized sum exactly; up to n - t dropouts are
// recovered, more end the round with a clear error; a client's masked vector
// looks uniform; t shares rebuild a secret and t - 1 do not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/Error.h"
#include "core/Rng.h"
#include "federated/SecureAggregation.h"
#include "federated/Shamir.h"

namespace dtrain::federated {
namespace {

std::vector<uint8_t> secretBytes(uint8_t start) {
  std::vector<uint8_t> s(32);
  std::iota(s.begin(), s.end(), start);
  return s;
}

TEST(Shamir, AnyTSharesRebuildTheSecretAndFewerDoNot) {
  const auto secret = secretBytes(200);  // wraps past 255: every byte value range
  const auto shares = shamirSplit(secret, 9, 5);
  ASSERT_EQ(shares.size(), 9u);
  for (int first = 0; first + 5 <= 9; ++first) {
    std::vector<ShamirShare> some(shares.begin() + first, shares.begin() + first + 5);
    EXPECT_EQ(shamirCombine(some, 32), secret) << "shares " << first << ".." << first + 4;
  }
  std::vector<ShamirShare> odd{shares[0], shares[2], shares[4], shares[6], shares[8]};
  EXPECT_EQ(shamirCombine(odd, 32), secret);
  std::vector<ShamirShare> tooFew(shares.begin(), shares.begin() + 4);
  EXPECT_NE(shamirCombine(tooFew, 32), secret);
  EXPECT_THROW(shamirCombine(std::vector<ShamirShare>{shares[1], shares[1]}, 32), Error);
}

std::vector<std::vector<float>> inputs(int n, size_t length) {
  std::vector<std::vector<float>> x(static_cast<size_t>(n));
  Rng rng(17);
  for (auto& v : x) {
    v.resize(length);
    for (float& f : v) f = static_cast<float>(rng.normal() * 0.05);
  }
  return x;
}

// The plain sum of the quantized inputs of `who`, in Z_2^32.
std::vector<uint32_t> plainSum(const std::vector<std::vector<float>>& x, const std::vector<int>& who, int n) {
  std::vector<uint32_t> s(x[0].size(), 0);
  for (int u : who)
    for (size_t i = 0; i < s.size(); ++i) s[i] += SecureAggregation::quantize(x[u][i], n);
  return s;
}

std::vector<uint32_t> protocol(SecureAggregation& sa, const std::vector<std::vector<float>>& x,
                               const std::vector<int>& survivors) {
  std::vector<std::vector<uint32_t>> masked;
  for (int u : survivors) masked.push_back(sa.maskedInput(u, x[u]));
  return sa.unmaskSumRaw(survivors, masked);
}

TEST(SecureAggregation, UnmaskedSumIsThePlainQuantizedSumExactly) {
  const int n = 7;
  const auto x = inputs(n, 1000);
  SecureAggregation sa(n, 5, 1000, 42);
  sa.setup();
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(protocol(sa, x, all), plainSum(x, all, n));
  // And the float result is the sum to the fixed point's resolution.
  std::vector<std::vector<uint32_t>> masked;
  for (int u : all) masked.push_back(sa.maskedInput(u, x[u]));
  const auto sum = sa.unmaskSum(all, masked);
  for (size_t i = 0; i < sum.size(); ++i) {
    double ref = 0;
    for (int u : all) ref += x[u][i];
    ASSERT_NEAR(sum[i], ref, n * std::ldexp(1.0, -kFractionBits)) << i;
  }
}

TEST(SecureAggregation, RecoversUpToNMinusTDropoutsAndRefusesMore) {
  const int n = 7, t = 4;
  const auto x = inputs(n, 500);
  for (const std::vector<int>& survivors :
       {std::vector<int>{0, 2, 3, 6}, std::vector<int>{1, 2, 4, 5, 6}, std::vector<int>{3, 4, 5, 6}}) {
    SecureAggregation sa(n, t, 500, 7);
    sa.setup();
    EXPECT_EQ(protocol(sa, x, survivors), plainSum(x, survivors, n)) << survivors.size() << " survivors";
  }
  SecureAggregation sa(n, t, 500, 7);
  sa.setup();
  try {
    protocol(sa, x, {0, 1, 5});
    ADD_FAILURE() << "3 survivors of threshold 4 were unmasked";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 of 7 clients reported, fewer than the threshold 4"),
              std::string::npos) << e.what();
  }
}

// What the server receives from one client, for an all-zero input: a byte
// histogram of 400,000 bytes against uniform. Fixed secrets (seed), so the
// statistic is a fixed number: chi-square with 255 degrees of freedom, mean
// 255, sd 22.6; a mask that leaked structure (a zero stream, a short period,
// the input) lands in the thousands.
TEST(SecureAggregation, AMaskedVectorLooksUniform) {
  const int n = 3;
  const size_t length = 100000;
  SecureAggregation sa(n, 2, length, 99);
  sa.setup();
  const auto y = sa.maskedInput(1, std::vector<float>(length, 0.0f));
  std::vector<int64_t> hist(256, 0);
  const auto* bytes = reinterpret_cast<const uint8_t*>(y.data());
  for (size_t i = 0; i < length * 4; ++i) ++hist[bytes[i]];
  const double expected = static_cast<double>(length * 4) / 256;
  double chi2 = 0;
  for (int64_t h : hist) chi2 += (h - expected) * (h - expected) / expected;
  EXPECT_LT(chi2, 400) << "chi-square " << chi2;
  EXPECT_GT(chi2, 150) << "chi-square " << chi2 << ": too even to be random";
  // And the same input with another client's masks differs everywhere.
  const auto other = sa.maskedInput(2, std::vector<float>(length, 0.0f));
  size_t equal = 0;
  for (size_t i = 0; i < length; ++i) equal += y[i] == other[i];
  EXPECT_LT(equal, 10u);
}

TEST(SecureAggregation, ClampsSoThatTheSumCannotWrap) {
  const int n = 4;
  const float big = 1e6f;  // far beyond 128 / n
  const uint32_t q = SecureAggregation::quantize(big, n);
  const auto asInt = static_cast<int32_t>(q);
  EXPECT_GT(asInt, 0);
  EXPECT_LE(static_cast<int64_t>(asInt) * n, int64_t{2147483647});
  EXPECT_EQ(static_cast<int32_t>(SecureAggregation::quantize(-big, n)), -asInt);
}

}  // namespace
}  // namespace dtrain::federated
