#include "federated/Shamir.h"

#include <sodium.h>

#include "core/Error.h"

namespace dtrain::federated {
namespace {

constexpr uint64_t kP = (uint64_t{1} << 61) - 1;
constexpr size_t kChunk = 7;

uint64_t mulmod(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  // 2^61 = 1 (mod p): fold the high bits onto the low ones.
  uint64_t lo = static_cast<uint64_t>(r & kP), hi = static_cast<uint64_t>(r >> 61);
  uint64_t s = lo + hi;
  while (s >= kP) s -= kP;
  return s;
}
uint64_t addmod(uint64_t a, uint64_t b) {
  const uint64_t s = a + b;
  return s >= kP ? s - kP : s;
}
uint64_t submod(uint64_t a, uint64_t b) { return a >= b ? a - b : a + kP - b; }
uint64_t powmod(uint64_t a, uint64_t e) {
  uint64_t r = 1;
  for (; e; e >>= 1, a = mulmod(a, a))
    if (e & 1) r = mulmod(r, a);
  return r;
}
uint64_t invmod(uint64_t a) { return powmod(a, kP - 2); }  // Fermat: p is prime

uint64_t randomBelowP() {
  for (;;) {
    uint64_t v;
    randombytes_buf(&v, sizeof v);
    v &= (uint64_t{1} << 61) - 1;
    if (v < kP) return v;
  }
}

size_t chunks(size_t bytes) { return (bytes + kChunk - 1) / kChunk; }

}  // namespace

size_t shamirShareBytes(size_t secretBytes) { return 8 * (1 + chunks(secretBytes)); }

std::vector<ShamirShare> shamirSplit(std::span<const uint8_t> secret, int n, int t) {
  DTRAIN_CHECK(sodium_init() >= 0, "libsodium failed to initialize");
  DTRAIN_CHECK(t >= 1 && t <= n, "Shamir: threshold ", t, " of ", n, " shares");
  std::vector<ShamirShare> shares(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) shares[i].x = static_cast<uint64_t>(i + 1);
  for (size_t c = 0; c < chunks(secret.size()); ++c) {
    uint64_t a0 = 0;
    for (size_t b = 0; b < kChunk && c * kChunk + b < secret.size(); ++b)
      a0 |= static_cast<uint64_t>(secret[c * kChunk + b]) << (8 * b);
    std::vector<uint64_t> coef{a0};
    for (int k = 1; k < t; ++k) coef.push_back(randomBelowP());
    for (auto& s : shares) {
      uint64_t y = 0;  // Horner
      for (size_t k = coef.size(); k-- > 0;) y = addmod(mulmod(y, s.x), coef[k]);
      s.y.push_back(y);
    }
  }
  return shares;
}

std::vector<uint8_t> shamirCombine(std::span<const ShamirShare> shares, size_t secretBytes) {
  DTRAIN_CHECK(!shares.empty(), "Shamir: no shares to combine");
  // Lagrange basis at 0: l_j = prod_{m != j} x_m / (x_m - x_j).
  std::vector<uint64_t> basis(shares.size());
  for (size_t j = 0; j < shares.size(); ++j) {
    uint64_t num = 1, den = 1;
    for (size_t m = 0; m < shares.size(); ++m) {
      if (m == j) continue;
      DTRAIN_CHECK(shares[m].x != shares[j].x, "Shamir: share ", shares[j].x, " given twice");
      num = mulmod(num, shares[m].x);
      den = mulmod(den, submod(shares[m].x, shares[j].x));
    }
    basis[j] = mulmod(num, invmod(den));
  }
  std::vector<uint8_t> out(secretBytes);
  for (size_t c = 0; c < chunks(secretBytes); ++c) {
    uint64_t v = 0;
    for (size_t j = 0; j < shares.size(); ++j) {
      DTRAIN_CHECK(shares[j].y.size() == chunks(secretBytes), "Shamir: share of another secret size");
      v = addmod(v, mulmod(basis[j], shares[j].y[c]));
    }
    for (size_t b = 0; b < kChunk && c * kChunk + b < secretBytes; ++b)
      out[c * kChunk + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  return out;
}

}  // namespace dtrain::federated
