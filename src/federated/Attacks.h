#pragma once
// Simulated malicious clients (--attack NAME --attackers FRACTION), by name:
//   none        honest
//   sign-flip   sends -scale x its honest update (Damaskinos et al.; Li et al. 2019)
//   gaussian    sends N(0, scale^2) noise instead of an update
//   label-flip  trains on flipped labels (c -> classes - 1 - c), sends that update
//   scale       sends scale x its honest update (model replacement, Bagdasaryan et al.)
// An attack either poisons the local data (labels) or rewrites the update after
// honest local training, or both.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/Rng.h"

namespace dtrain::federated {

struct Attack {
  std::string description;
  bool flipsLabels = false;
  // Rewrites an update in place (null: leaves it).
  void (*rewrite)(std::span<float> update, double scale, Rng& rng) = nullptr;
};

// Throws UsageError naming the known attacks for an unknown name.
const Attack& attack(const std::string& name);
std::string describeAttacks();

// The malicious clients: round(fraction x clients) of them, chosen from the seed.
std::vector<char> chooseAttackers(int clients, double fraction, uint64_t seed);

}  // namespace dtrain::federated
