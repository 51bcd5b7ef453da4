#pragma once
// What federated ranks send each other about a client's round, and how the
// receiver reads it; numbers from a peer are checked before they become an
// index or an integer (tests/fuzz/targets/FuzzFederated.cpp):
//   --deadline-clock wall (WallClockRounds.cpp), a host's update to the server:
//     [round][client slot][mean loss][steps][delta...], the four 8-byte fields
//     bit for bit in pairs of floats (the messages are F32)
//   the simulated clock's exchange (FederatedRunner::exchangeResults), per
//     client: [mean loss][steps as a double][delta...], in the same way
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "core/Error.h"
#include "federated/LocalTrainer.h"

namespace dtrain::federated {

inline constexpr size_t kUpdateHeaderFloats = 8;  // four 8-byte fields
inline constexpr size_t kResultHeaderFloats = 4;  // two doubles
// Far above any client's local steps; doubles hold every whole number below it.
inline constexpr int64_t kMaxClientSteps = int64_t{1} << 53;

// 8-byte fields carried bit for bit in pairs of floats.
template <typename T>
void putField(float* at, T v) {
  static_assert(sizeof(T) == 8);
  std::memcpy(at, &v, sizeof v);
}
template <typename T>
T getField(const float* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

// A client's local steps as a peer sent them (a double in the exchange).
inline int64_t clientStepsFromPeer(double v, std::string_view from) {
  if (!(std::isfinite(v) && v == std::floor(v) && v >= 0 && v <= static_cast<double>(kMaxClientSteps)))
    throw Error(detail::concat("fedavg: malformed client result from ", from, ": steps ", v));
  return static_cast<int64_t>(v);
}

// A host's update message (kUpdateHeaderFloats + modelSize floats) read by the
// server during `round`: nullopt for an earlier round's (late: dropped); else
// the client slot it fills, checked below `slots`, and the client's result.
inline std::optional<std::pair<size_t, ClientResult>> readClientUpdate(const float* m, size_t modelSize,
                                                                       int64_t round, size_t slots,
                                                                       int host) {
  if (getField<int64_t>(m) != round) return std::nullopt;
  const auto slot = getField<int64_t>(m + 2);
  if (slot < 0 || static_cast<uint64_t>(slot) >= slots)
    throw Error(detail::concat("fedavg: host ", host, " sent an update for client slot ", slot, " of ", slots));
  ClientResult r;
  r.meanLoss = getField<double>(m + 4);
  r.steps = getField<int64_t>(m + 6);
  if (r.steps < 0 || r.steps > kMaxClientSteps)
    throw Error(detail::concat("fedavg: host ", host, " sent an update of ", r.steps, " local steps"));
  r.delta.assign(m + kUpdateHeaderFloats, m + kUpdateHeaderFloats + modelSize);
  return std::pair{static_cast<size_t>(slot), std::move(r)};
}

}  // namespace dtrain::federated
