#include "federated/Aggregators.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/Error.h"
#include "core/ThreadPool.h"
#include "core/NameRegistry.h"

namespace dtrain::federated {
namespace {

struct Entry {
  std::string description;
  AggregateFn fn;
  bool krum = false;  // needs n >= 2f + 3 updates (n - f - 2 neighbours, one more to choose)
};

void weightedMean(const UpdateSet& s, std::span<float> out) {
  const double total = std::accumulate(s.weights.begin(), s.weights.end(), 0.0);
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t k = 0; k < s.size(); ++k) {
    const float w = static_cast<float>(s.weights[k] / total);
    const float* u = s.updates[k].data();
    for (size_t i = 0; i < out.size(); ++i) out[i] += w * u[i];
  }
}

// Per coordinate: the sorted values of every update, reduced by `reduce`.
template <typename Reduce>
void perCoordinate(const UpdateSet& s, std::span<float> out, Reduce reduce) {
  const size_t n = s.size();
  parallelFor(0, static_cast<int64_t>(out.size()), 4096, [&](int64_t lo, int64_t hi) {
    std::vector<float> column(n);
    for (int64_t i = lo; i < hi; ++i) {
      for (size_t k = 0; k < n; ++k) column[k] = s.updates[k][i];
      out[i] = reduce(column);
    }
  });
}

float median(std::vector<float>& v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  const float upper = v[mid];
  const float lower = *std::max_element(v.begin(), v.begin() + mid);
  return 0.5f * (lower + upper);
}

// Krum scores: for each update, the sum of squared distances to its n - f - 2
// nearest other updates.
std::vector<double> krumScores(const UpdateSet& s, int f) {
  const size_t n = s.size();
  std::vector<double> dist(n * n, 0.0);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      double d = 0;
      for (size_t i = 0; i < s.dim(); ++i) {
        const double x = s.updates[a][i] - s.updates[b][i];
        d += x * x;
      }
      dist[a * n + b] = dist[b * n + a] = d;
    }
  const size_t neighbours = n - static_cast<size_t>(f) - 2;
  std::vector<double> scores(n);
  for (size_t a = 0; a < n; ++a) {
    std::vector<double> row;
    for (size_t b = 0; b < n; ++b)
      if (b != a) row.push_back(dist[a * n + b]);
    std::partial_sort(row.begin(), row.begin() + neighbours, row.end());
    scores[a] = std::accumulate(row.begin(), row.begin() + neighbours, 0.0);
  }
  return scores;
}

// Indices of the `count` best (lowest) Krum scores, best first.
std::vector<size_t> bestByKrum(const UpdateSet& s, int f, size_t count) {
  const auto scores = krumScores(s, f);
  std::vector<size_t> order(s.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  order.resize(count);
  return order;
}

const NameRegistry<Entry>& registry() {
  static const NameRegistry<Entry> entries("--aggregator", {
      {"mean", {"weighted mean (FedAvg)", [](const UpdateSet& s, const AggregatorOptions&,
                                             std::span<float> out) { weightedMean(s, out); }}},
      {"median", {"coordinate-wise median",
                  [](const UpdateSet& s, const AggregatorOptions&, std::span<float> out) {
                    perCoordinate(s, out, median);
                  }}},
      {"trimmed-mean",
       {"coordinate-wise mean without the --trim-fraction largest and smallest",
        [](const UpdateSet& s, const AggregatorOptions& o, std::span<float> out) {
          const size_t cut = static_cast<size_t>(o.trimFraction * static_cast<double>(s.size()));
          perCoordinate(s, out, [cut](std::vector<float>& v) {
            std::sort(v.begin(), v.end());
            double sum = 0;
            for (size_t i = cut; i < v.size() - cut; ++i) sum += v[i];
            return static_cast<float>(sum / static_cast<double>(v.size() - 2 * cut));
          });
        }}},
      {"krum", {"the update nearest its n - f - 2 neighbours (--byzantine f)",
                [](const UpdateSet& s, const AggregatorOptions& o, std::span<float> out) {
                  const size_t best = bestByKrum(s, o.byzantine, 1)[0];
                  std::copy(s.updates[best].begin(), s.updates[best].end(), out.begin());
                },
                true}},
      {"multi-krum", {"mean of the n - f updates with the best Krum scores",
                      [](const UpdateSet& s, const AggregatorOptions& o, std::span<float> out) {
                        UpdateSet chosen;
                        for (size_t k : bestByKrum(s, o.byzantine, s.size() - o.byzantine)) {
                          chosen.updates.push_back(s.updates[k]);
                          chosen.weights.push_back(1.0);
                        }
                        weightedMean(chosen, out);
                      },
                      true}},
  });
  return entries;
}

const Entry& entry(const std::string& name) { return registry().find(name); }

}  // namespace

const AggregateFn& aggregator(const std::string& name) { return entry(name).fn; }

std::string describeAggregators() { return registry().describe(); }

size_t minimumUpdates(const std::string& name, const AggregatorOptions& o) {
  return entry(name).krum ? 2 * static_cast<size_t>(o.byzantine) + 3 : 1;
}

}  // namespace dtrain::federated
