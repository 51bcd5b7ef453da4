#pragma once
// Shamir's t-of-n secret sharing (secure aggregation's dropout recovery): a
// byte string cut into 7-byte chunks, each the constant term of a random
// polynomial of degree t-1 over GF(p), p = 2^61 - 1 (a chunk < 2^56 < p);
// share x (1..n) holds the polynomials' values at x. Any t shares give the
// secret back by Lagrange interpolation at 0; fewer reveal nothing about it.
#include <cstdint>
#include <span>
#include <vector>

namespace dtrain::federated {

struct ShamirShare {
  uint64_t x = 0;               // 1..n
  std::vector<uint64_t> y;      // one value per chunk
};

// The random coefficients come from libsodium (the OS generator).
std::vector<ShamirShare> shamirSplit(std::span<const uint8_t> secret, int n, int t);
// The secret from exactly the given shares (at least t of them, distinct x):
// with fewer than t it returns a wrong value, as the scheme intends.
std::vector<uint8_t> shamirCombine(std::span<const ShamirShare> shares, size_t secretBytes);
// Bytes of one share on the wire: x and the chunk values, 8 bytes each.
size_t shamirShareBytes(size_t secretBytes);

}  // namespace dtrain::federated
