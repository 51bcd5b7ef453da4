#pragma once
// Secure aggregation (Bonawitz et al. 2017, the semi-honest protocol), one
// round, simulated: every client's and the server's computation is its own
// function and they share only what the protocol sends (public keys, Shamir
// shares relayed through the server, masked vectors, the shares survivors
// reveal). The server learns the sum of the surviving clients' inputs only.
//
//   0 AdvertiseKeys  client u: an X25519 key pair (s_u^SK, s_u^PK) and a
//                    self-mask seed b_u; sends s_u^PK.
//   1 ShareKeys      client u: Shamir t-of-n shares of b_u and of s_u^SK, one
//                    of each for every selected client (relayed by the server;
//                    the paper encrypts them for their recipient, which a
//                    simulation in one process cannot make meaningful).
//   2 MaskedInput    client u: y_u = q(x_u) + PRG(b_u) + sum_{v>u} PRG(s_uv)
//                    - sum_{v<u} PRG(s_uv) in Z_2^32, s_uv = H(X25519(s_u^SK,
//                    s_v^PK)) (= s_vu); q: fixed point with kFractionBits.
//                    Clients that drop now (--client-dropout) send nothing.
//   3 Unmasking      each survivor reveals its shares of b_u for the survivors
//                    and of s_u^SK for the dropped; with at least t survivors
//                    the server rebuilds them, removes the self masks and the
//                    dropped clients' pairwise masks: sum_u q(x_u) exactly.
// Fewer than t survivors: the round cannot be unmasked (an Error saying so).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "federated/Shamir.h"

namespace dtrain::federated {

// Fixed point: x -> round(x * 2^kFractionBits) as a two's complement 32-bit
// integer. A client's values are clamped so that n of them cannot overflow
// the sum (|sum| < 2^31 / 2^24 = 128 per coordinate for any n).
inline constexpr int kFractionBits = 24;

struct SecAggTraffic {
  int64_t upPerClient = 0;    // keys, shares, the masked vector, the revealed shares (bytes)
  int64_t maskedBytes = 0;    // the masked vector alone
};

class SecureAggregation {
 public:
  // n selected clients (indices 0..n-1), threshold t, vectors of `length`.
  // `seed`: derive every secret from it (tests); none: libsodium's OS
  // generator, as a deployment would.
  SecureAggregation(int n, int t, size_t length, std::optional<uint64_t> seed = std::nullopt);

  // Rounds 0 and 1 for every selected client.
  void setup();
  // Round 2, client u: its input quantized and masked.
  std::vector<uint32_t> maskedInput(int u, std::span<const float> x);
  // Round 3, the server: survivors (sorted client indices) and their masked
  // inputs, in that order. Returns sum_u q(x_u) / 2^kFractionBits. Throws
  // Error when fewer than t survived.
  std::vector<float> unmaskSum(const std::vector<int>& survivors,
                               const std::vector<std::vector<uint32_t>>& masked);
  // The integer sum before the fixed point is undone (tests: exactness).
  std::vector<uint32_t> unmaskSumRaw(const std::vector<int>& survivors,
                                     const std::vector<std::vector<uint32_t>>& masked);

  static uint32_t quantize(float x, int n);
  SecAggTraffic traffic() const;
  // Values a client clamped to keep the sum in range (0 in any sane run).
  int64_t clamped() const { return clamped_; }

 private:
  struct Client {
    uint8_t pk[32], sk[32], b[32];
    std::vector<ShamirShare> bShares, skShares;  // [v]: the share held by client v
  };
  void expand(const uint8_t seed[32], std::vector<uint32_t>& out) const;
  void pairSeed(const uint8_t sk[32], const uint8_t pk[32], uint8_t out[32]) const;
  void randomBytes(uint8_t* out, size_t n, uint64_t stream);

  int n_, t_;
  size_t length_;
  std::optional<uint64_t> seed_;
  std::vector<Client> clients_;
  int64_t clamped_ = 0;
};

}  // namespace dtrain::federated
