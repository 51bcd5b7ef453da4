#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/Rng.h"
#include "core/Error.h"
#include "federated/Aggregators.h"
#include "federated/Attacks.h"

namespace dtrain::federated {
namespace {

std::vector<float> run(const std::string& name, const std::vector<std::vector<float>>& updates,
                       AggregatorOptions o = {}, std::vector<double> weights = {}) {
  UpdateSet set;
  for (size_t k = 0; k < updates.size(); ++k) {
    set.updates.emplace_back(updates[k]);
    set.weights.push_back(weights.empty() ? 1.0 : weights[k]);
  }
  std::vector<float> out(updates[0].size());
  aggregator(name)(set, o, out);
  return out;
}

TEST(Aggregators, MeanIsWeightedBySamples) {
  const auto out = run("mean", {{1, 0}, {4, 3}}, {}, {2, 1});
  EXPECT_FLOAT_EQ(out[0], 2.0f);
  EXPECT_FLOAT_EQ(out[1], 1.0f);
}

TEST(Aggregators, MedianAndTrimmedMeanPerCoordinate) {
  const std::vector<std::vector<float>> u{{1, 10}, {2, 20}, {3, 30}, {100, -50}};
  const auto med = run("median", u);
  EXPECT_FLOAT_EQ(med[0], 2.5f);
  EXPECT_FLOAT_EQ(med[1], 15.0f);
  AggregatorOptions o;
  o.trimFraction = 0.25;  // one value cut at each end of four
  const auto trimmed = run("trimmed-mean", u, o);
  EXPECT_FLOAT_EQ(trimmed[0], 2.5f);
  EXPECT_FLOAT_EQ(trimmed[1], 15.0f);
}

// Honest updates near (1, 1, ...), attackers far away in the opposite direction.
std::vector<std::vector<float>> attacked(int honest, int bad, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<float>> u;
  for (int k = 0; k < honest + bad; ++k) {
    std::vector<float> v(16);
    for (float& x : v) x = 1.0f + 0.1f * rng.normal();
    if (k >= honest) attack("sign-flip").rewrite(v, 10.0, rng);
    u.push_back(v);
  }
  return u;
}

double distanceToOnes(const std::vector<float>& v) {
  double d = 0;
  for (float x : v) d += (x - 1.0) * (x - 1.0);
  return std::sqrt(d);
}

TEST(Aggregators, RobustRulesSurviveASignFlipThatBreaksTheMean) {
  const auto u = attacked(7, 3, 42);
  AggregatorOptions o;
  o.byzantine = 3;
  o.trimFraction = 0.3;
  // The mean is pulled to about -2: the wrong direction.
  EXPECT_LT(run("mean", u)[0], 0.0f);
  EXPECT_GT(distanceToOnes(run("mean", u)), 8.0);
  for (const char* name : {"median", "trimmed-mean", "krum", "multi-krum"})
    EXPECT_LT(distanceToOnes(run(name, u, o)), 0.5) << name;
}

TEST(Aggregators, KrumChoosesAnHonestUpdate) {
  const auto u = attacked(6, 2, 7);
  AggregatorOptions o;
  o.byzantine = 2;
  const auto out = run("krum", u, o);
  bool isHonest = false;
  for (int k = 0; k < 6; ++k) isHonest = isHonest || out == u[k];
  EXPECT_TRUE(isHonest);
  EXPECT_EQ(minimumUpdates("krum", o), 7u);
  EXPECT_EQ(minimumUpdates("median", o), 1u);
}

TEST(Aggregators, UnknownNamesAreUsageErrors) {
  EXPECT_THROW(aggregator("average"), UsageError);
  EXPECT_THROW(attack("flip"), UsageError);
}

TEST(Attacks, AttackersAreTheRequestedFraction) {
  const auto bad = chooseAttackers(100, 0.2, 3);
  int count = 0;
  for (char b : bad) count += b;
  EXPECT_EQ(count, 20);
  EXPECT_NE(bad, chooseAttackers(100, 0.2, 4));  // chosen from the seed
  EXPECT_TRUE(attack("label-flip").flipsLabels);
  EXPECT_EQ(attack("label-flip").rewrite, nullptr);
}

}  // namespace
}  // namespace dtrain::federated
