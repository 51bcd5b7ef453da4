#include "federated/SecureAggregation.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/Error.h"

namespace dtrain::federated {

using detail::concat;

SecureAggregation::SecureAggregation(int n, int t, size_t length, std::optional<uint64_t> seed)
    : n_(n), t_(t), length_(length), seed_(seed) {
  DTRAIN_CHECK(sodium_init() >= 0, "libsodium failed to initialize");
  DTRAIN_CHECK(n >= 1 && t >= 1 && t <= n, "secure aggregation: threshold ", t, " of ", n, " clients");
}

void SecureAggregation::randomBytes(uint8_t* out, size_t n, uint64_t stream) {
  if (!seed_) return randombytes_buf(out, n);
  uint8_t key[randombytes_SEEDBYTES] = {};
  std::memcpy(key, &*seed_, sizeof(uint64_t));
  std::memcpy(key + 8, &stream, sizeof stream);
  randombytes_buf_deterministic(out, n, key);
}

void SecureAggregation::setup() {
  clients_.assign(static_cast<size_t>(n_), Client{});
  for (int u = 0; u < n_; ++u) {
    Client& c = clients_[u];
    uint8_t keySeed[crypto_box_SEEDBYTES];
    randomBytes(keySeed, sizeof keySeed, 2 * static_cast<uint64_t>(u));
    crypto_box_seed_keypair(c.pk, c.sk, keySeed);  // X25519
    randomBytes(c.b, sizeof c.b, 2 * static_cast<uint64_t>(u) + 1);
    c.bShares = shamirSplit(c.b, n_, t_);
    c.skShares = shamirSplit(c.sk, n_, t_);
  }
}

void SecureAggregation::expand(const uint8_t seed[32], std::vector<uint32_t>& out) const {
  out.resize(length_);
  // ChaCha20 keyed by the seed (libsodium's deterministic generator).
  randombytes_buf_deterministic(out.data(), out.size() * sizeof(uint32_t), seed);
}

void SecureAggregation::pairSeed(const uint8_t sk[32], const uint8_t pk[32], uint8_t out[32]) const {
  uint8_t shared[crypto_scalarmult_BYTES];
  DTRAIN_CHECK(crypto_scalarmult(shared, sk, pk) == 0, "secure aggregation: a degenerate public key");
  crypto_generichash(out, 32, shared, sizeof shared, nullptr, 0);  // s_uv = H(X25519(...))
}

uint32_t SecureAggregation::quantize(float x, int n) {
  // |value| <= 2^31 / n: n clamped values still sum without wrapping.
  const double limit = std::floor(2147483647.0 / std::max(1, n));
  const double v = std::clamp(std::nearbyint(static_cast<double>(x) * (1 << kFractionBits)), -limit, limit);
  return static_cast<uint32_t>(static_cast<int32_t>(v));
}

std::vector<uint32_t> SecureAggregation::maskedInput(int u, std::span<const float> x) {
  DTRAIN_CHECK(x.size() == length_, "secure aggregation: input of ", x.size(), " values, expected ", length_);
  const Client& me = clients_.at(static_cast<size_t>(u));
  std::vector<uint32_t> y(length_), mask;
  const double limit = std::floor(2147483647.0 / n_) / (1 << kFractionBits);
  for (size_t i = 0; i < length_; ++i) {
    clamped_ += std::abs(x[i]) > limit;
    y[i] = quantize(x[i], n_);
  }
  expand(me.b, mask);
  for (size_t i = 0; i < length_; ++i) y[i] += mask[i];
  for (int v = 0; v < n_; ++v) {
    if (v == u) continue;
    uint8_t s[32];
    pairSeed(me.sk, clients_[v].pk, s);
    expand(s, mask);
    if (v > u)
      for (size_t i = 0; i < length_; ++i) y[i] += mask[i];
    else
      for (size_t i = 0; i < length_; ++i) y[i] -= mask[i];
  }
  return y;
}

std::vector<uint32_t> SecureAggregation::unmaskSumRaw(const std::vector<int>& survivors,
                                                      const std::vector<std::vector<uint32_t>>& masked) {
  DTRAIN_CHECK(survivors.size() == masked.size(), "secure aggregation: ", survivors.size(),
               " survivors, ", masked.size(), " masked inputs");
  if (static_cast<int>(survivors.size()) < t_)
    throw Error(concat("secure aggregation: ", survivors.size(), " of ", n_,
                       " clients reported, fewer than the threshold ", t_,
                       ": their masks cannot be removed"));
  std::vector<char> alive(static_cast<size_t>(n_), 0);
  for (int u : survivors) alive.at(static_cast<size_t>(u)) = 1;
  std::vector<uint32_t> z(length_, 0), mask;
  for (const auto& y : masked)
    for (size_t i = 0; i < length_; ++i) z[i] += y[i];
  // The shares the survivors reveal: t of them are enough, any t.
  auto reveal = [&](const std::vector<ShamirShare> Client::*which, int owner) {
    std::vector<ShamirShare> got;
    for (int v : survivors) {
      got.push_back((clients_[owner].*which)[v]);
      if (static_cast<int>(got.size()) == t_) break;
    }
    return got;
  };
  for (int u = 0; u < n_; ++u) {
    if (alive[u]) {
      // The self mask of a survivor, from b_u rebuilt.
      const auto b = shamirCombine(reveal(&Client::bShares, u), 32);
      expand(b.data(), mask);
      for (size_t i = 0; i < length_; ++i) z[i] -= mask[i];
    } else {
      // A dropped client: its key rebuilt, the pairwise masks it shares with
      // the survivors (left in their inputs) removed.
      const auto sk = shamirCombine(reveal(&Client::skShares, u), 32);
      for (int v : survivors) {
        uint8_t s[32];
        pairSeed(sk.data(), clients_[v].pk, s);
        expand(s, mask);
        // Survivor v added +mask when u > v, -mask when u < v.
        if (u > v)
          for (size_t i = 0; i < length_; ++i) z[i] -= mask[i];
        else
          for (size_t i = 0; i < length_; ++i) z[i] += mask[i];
      }
    }
  }
  return z;
}

std::vector<float> SecureAggregation::unmaskSum(const std::vector<int>& survivors,
                                                const std::vector<std::vector<uint32_t>>& masked) {
  const auto z = unmaskSumRaw(survivors, masked);
  std::vector<float> out(length_);
  for (size_t i = 0; i < length_; ++i)
    out[i] = static_cast<float>(static_cast<double>(static_cast<int32_t>(z[i])) / (1 << kFractionBits));
  return out;
}

SecAggTraffic SecureAggregation::traffic() const {
  SecAggTraffic t;
  t.maskedBytes = static_cast<int64_t>(length_ * sizeof(uint32_t));
  const auto share = static_cast<int64_t>(shamirShareBytes(32));
  // Up: the public key, two shares for each other client, the masked vector,
  // and in unmasking one share per other selected client.
  t.upPerClient = 32 + 2 * share * (n_ - 1) + t.maskedBytes + share * (n_ - 1);
  return t;
}

}  // namespace dtrain::federated
