#include "data/IndexPartition.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/Error.h"
#include "core/Rng.h"

namespace dtrain::data {
namespace {

void shuffle(std::vector<int64_t>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// Cuts `order` into `count` contiguous pieces whose sizes differ by at most one.
Parts cut(const std::vector<int64_t>& order, int64_t count) {
  Parts pieces(static_cast<size_t>(count));
  const auto n = static_cast<int64_t>(order.size());
  for (int64_t k = 0; k < count; ++k)
    pieces[k].assign(order.begin() + k * n / count, order.begin() + (k + 1) * n / count);
  return pieces;
}

}  // namespace

Parts partitionIid(int64_t n, int parts, uint64_t seed) {
  DTRAIN_CHECK_USAGE(parts >= 1 && parts <= n, "cannot split ", n, " samples into ", parts,
                     " parts");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(seed);
  shuffle(order, rng);
  return cut(order, parts);
}

Parts partitionByLabel(std::span<const int32_t> labels, int parts, int shardsPerPart,
                       uint64_t seed) {
  const auto n = static_cast<int64_t>(labels.size());
  const int64_t shards = int64_t{parts} * shardsPerPart;
  DTRAIN_CHECK_USAGE(parts >= 1 && shardsPerPart >= 1 && shards <= n, "cannot split ", n,
                     " samples into ", parts, " parts of ", shardsPerPart, " shards each");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Stable, so equal labels keep index order and the result depends only on the seed.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return labels[a] < labels[b]; });
  Parts pieces = cut(order, shards);
  std::vector<int64_t> shardIds(static_cast<size_t>(shards));
  std::iota(shardIds.begin(), shardIds.end(), int64_t{0});
  Rng rng(seed);
  shuffle(shardIds, rng);
  Parts result(static_cast<size_t>(parts));
  for (int64_t s = 0; s < shards; ++s) {
    auto& part = result[s / shardsPerPart];
    const auto& piece = pieces[shardIds[s]];
    part.insert(part.end(), piece.begin(), piece.end());
  }
  return result;
}

}  // namespace dtrain::data

namespace dtrain::data {
namespace {

// Proportions drawn from Dirichlet(alpha, ..., alpha): normalized Gamma(alpha, 1) draws.
std::vector<double> dirichlet(int k, double alpha, std::mt19937_64& gen) {
  std::gamma_distribution<double> gamma(alpha, 1.0);
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (auto& v : p) sum += (v = gamma(gen));
  if (sum <= 0) {  // every draw underflowed (tiny alpha): all mass on one part
    std::fill(p.begin(), p.end(), 0.0);
    p[gen() % p.size()] = 1.0;
    return p;
  }
  for (auto& v : p) v /= sum;
  return p;
}

// Cut points of `n` items in proportions `p` (cumulative rounding: sizes sum to n).
std::vector<int64_t> cutPoints(int64_t n, const std::vector<double>& p) {
  std::vector<int64_t> cuts{0};
  double acc = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    acc += p[i];
    cuts.push_back(i + 1 == p.size() ? n : std::min<int64_t>(n, std::llround(acc * n)));
  }
  return cuts;
}

}  // namespace

Parts partitionDirichlet(std::span<const int32_t> labels, int parts, double alpha, uint64_t seed) {
  DTRAIN_CHECK_USAGE(parts >= 1, "cannot split samples into ", parts, " parts");
  DTRAIN_CHECK_USAGE(std::isfinite(alpha) && alpha > 0, "--dirichlet-alpha must be > 0 (got ",
                     alpha, ")");
  int32_t classes = 0;
  for (int32_t l : labels) classes = std::max(classes, l + 1);
  std::vector<std::vector<int64_t>> byClass(static_cast<size_t>(classes));
  for (size_t i = 0; i < labels.size(); ++i) byClass[labels[i]].push_back(static_cast<int64_t>(i));
  std::mt19937_64 gen(seed);
  Rng rng(seed ^ 0x5eedULL);
  Parts result(static_cast<size_t>(parts));
  for (auto& members : byClass) {
    shuffle(members, rng);
    const auto cuts = cutPoints(static_cast<int64_t>(members.size()), dirichlet(parts, alpha, gen));
    for (int k = 0; k < parts; ++k)
      result[k].insert(result[k].end(), members.begin() + cuts[k], members.begin() + cuts[k + 1]);
  }
  return result;
}

Parts partitionQuantitySkew(int64_t n, int parts, double sigma, uint64_t seed) {
  DTRAIN_CHECK_USAGE(parts >= 1 && parts <= n, "cannot split ", n, " samples into ", parts,
                     " parts");
  DTRAIN_CHECK_USAGE(std::isfinite(sigma) && sigma >= 0, "--quantity-skew must be >= 0 (got ",
                     sigma, ")");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(seed);
  shuffle(order, rng);
  // Sizes: one sample each, the rest in log-normal proportions.
  std::mt19937_64 gen(seed ^ 0x9e3779b97f4a7c15ULL);
  std::lognormal_distribution<double> logNormal(0.0, sigma);
  std::vector<double> p(static_cast<size_t>(parts));
  double sum = 0;
  for (auto& v : p) sum += (v = logNormal(gen));
  for (auto& v : p) v /= sum;
  const auto cuts = cutPoints(n - parts, p);
  Parts result(static_cast<size_t>(parts));
  int64_t at = 0;
  for (int k = 0; k < parts; ++k) {
    const int64_t size = 1 + cuts[k + 1] - cuts[k];
    result[k].assign(order.begin() + at, order.begin() + at + size);
    at += size;
  }
  return result;
}

}  // namespace dtrain::data
