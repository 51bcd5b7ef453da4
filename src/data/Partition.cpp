#include "data/Partition.h"

#include <algorithm>
#include <numeric>

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
