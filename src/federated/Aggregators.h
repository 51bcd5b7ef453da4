#pragma once
// Server-side aggregation rules of client updates (model deltas), by name:
//   mean          weighted mean (FedAvg: weights n_k)
//   median        coordinate-wise median (Yin et al. 2018)
//   trimmed-mean  coordinate-wise mean after cutting the trimFraction smallest and
//                 largest values (Yin et al. 2018)
//   krum          the update closest to its n - f - 2 nearest neighbours (Blanchard
//                 et al. 2017)
//   multi-krum    the mean of the n - f updates with the best Krum scores
// The robust rules ignore the weights: a Byzantine client could lie about n_k.
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace dtrain::federated {

struct AggregatorOptions {
  double trimFraction = 0.1;
  int byzantine = 0;  // f of krum and multi-krum
};

// The updates of one round: each a flat vector of the same length, with a weight.
struct UpdateSet {
  std::vector<std::span<const float>> updates;
  std::vector<double> weights;
  size_t size() const { return updates.size(); }
  size_t dim() const { return updates.empty() ? 0 : updates[0].size(); }
};

using AggregateFn =
    std::function<void(const UpdateSet& set, const AggregatorOptions& o, std::span<float> out)>;

// Throws UsageError naming the known rules for an unknown name.
const AggregateFn& aggregator(const std::string& name);
std::string describeAggregators();
// The fewest updates `name` needs with these options (krum: 2f + 3).
size_t minimumUpdates(const std::string& name, const AggregatorOptions& o);

}  // namespace dtrain::federated
