// The federated partitions of data/IndexPartition.h: every sample in exactly one client.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/Error.h"
#include "data/IndexPartition.h"

namespace dtrain::data {
namespace {

std::vector<int32_t> balancedLabels(int n, int classes) {
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  return labels;
}

void expectCover(const Parts& parts, int64_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& p : parts)
    for (int64_t i : p) ++seen.at(i);
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
}

// Mean number of distinct classes per non-empty part.
double classesPerPart(const Parts& parts, const std::vector<int32_t>& labels) {
  double sum = 0;
  int nonEmpty = 0;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    std::set<int32_t> c;
    for (int64_t i : p) c.insert(labels[i]);
    sum += c.size();
    ++nonEmpty;
  }
  return sum / nonEmpty;
}

TEST(Partition, DirichletCoversAndSkewsLabels) {
  const auto labels = balancedLabels(5000, 10);
  const auto skewed = partitionDirichlet(labels, 20, 0.1, 1);
  const auto mild = partitionDirichlet(labels, 20, 100.0, 1);
  expectCover(skewed, 5000);
  expectCover(mild, 5000);
  EXPECT_LT(classesPerPart(skewed, labels), 5.0);
  EXPECT_GT(classesPerPart(mild, labels), 9.5);
  EXPECT_EQ(partitionDirichlet(labels, 20, 0.1, 1), skewed);  // from the seed
  EXPECT_THROW(partitionDirichlet(labels, 20, 0.0, 1), UsageError);
}

TEST(Partition, QuantitySkewMakesUnequalSizes) {
  const auto parts = partitionQuantitySkew(10000, 50, 1.0, 3);
  expectCover(parts, 10000);
  size_t lo = 10000, hi = 0;
  for (const auto& p : parts) {
    lo = std::min(lo, p.size());
    hi = std::max(hi, p.size());
  }
  EXPECT_GE(lo, 1u);
  EXPECT_GT(hi, 4 * lo);
  // sigma 0: equal sizes (up to rounding).
  for (const auto& p : partitionQuantitySkew(10000, 50, 0.0, 3)) EXPECT_NEAR(p.size(), 200.0, 1.0);
}

}  // namespace
}  // namespace dtrain::data
