#include "federated/Attacks.h"

#include <cmath>
#include <map>
#include <numeric>

#include "core/NameRegistry.h"

namespace dtrain::federated {
namespace {

const NameRegistry<Attack>& registry() {
  static const NameRegistry<Attack> entries("--attack", {
      {"none", {"honest clients", false, nullptr}},
      {"sign-flip", {"-scale x the honest update", false,
                     [](std::span<float> u, double scale, Rng&) {
                       for (float& v : u) v = static_cast<float>(-scale * v);
                     }}},
      {"gaussian", {"N(0, scale^2) noise instead of the update", false,
                    [](std::span<float> u, double scale, Rng& rng) {
                      for (float& v : u) v = static_cast<float>(scale * rng.normal());
                    }}},
      {"label-flip", {"trains on labels c -> classes - 1 - c", true, nullptr}},
      {"scale", {"scale x the honest update", false,
                 [](std::span<float> u, double scale, Rng&) {
                   for (float& v : u) v = static_cast<float>(scale * v);
                 }}},
  });
  return entries;
}

}  // namespace

const Attack& attack(const std::string& name) { return registry().find(name); }

std::string describeAttacks() { return registry().describe(); }

std::vector<char> chooseAttackers(int clients, double fraction, uint64_t seed) {
  std::vector<int> ids(static_cast<size_t>(clients));
  std::iota(ids.begin(), ids.end(), 0);
  Rng rng(seed ^ 0xa77ac6e5ULL);
  for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[rng.below(i)]);
  std::vector<char> malicious(static_cast<size_t>(clients), 0);
  const auto count = static_cast<size_t>(std::llround(fraction * clients));
  for (size_t i = 0; i < count && i < ids.size(); ++i) malicious[ids[i]] = 1;
  return malicious;
}

}  // namespace dtrain::federated
