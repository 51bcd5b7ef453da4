#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "data/DataTestUtil.h"
#include "data/Dataset.h"
#include "data/Loader.h"
#include "data/IndexPartition.h"
#include "data/SyntheticDataset.h"

using namespace dtrain;
using namespace dtrain::data;

TEST(TensorDataset, GatherBatchAndRange) {
  std::vector<float> xs(5 * 2 * 2);
  std::iota(xs.begin(), xs.end(), 0.0f);
  TensorDataset ds(Tensor::fromVector(xs, {5, 2, 2}), Tensor::fromInts({0, 1, 2, 1, 0}, {5}), 3);
  EXPECT_EQ(ds.size(), 5);
  EXPECT_EQ(ds.sampleShape(), (Shape{2, 2}));
  EXPECT_EQ(ds.batchShape(7), (Shape{7, 2, 2}));
  std::vector<int64_t> idx{4, 0, 4};
  Batch b = ds.batch(idx);
  EXPECT_EQ(b.x.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(b.x.toVector(), (std::vector<float>{16, 17, 18, 19, 0, 1, 2, 3, 16, 17, 18, 19}));
  EXPECT_EQ(std::vector<int32_t>(b.y.data<int32_t>(), b.y.data<int32_t>() + 3),
            (std::vector<int32_t>{0, 0, 0}));
  Batch r = ds.range(1, 3);
  EXPECT_EQ(r.size(), 2);
  EXPECT_EQ(r.x.at({1, 1, 1}), 11.0f);
  EXPECT_EQ(labelsOf(ds), (std::vector<int32_t>{0, 1, 2, 1, 0}));
  std::vector<int64_t> bad{5};
  EXPECT_EQ(test::errorOf([&] { ds.batch(bad); }), "dataset index 5 out of range [0, 5)");
  EXPECT_THROW(TensorDataset(Tensor::zeros({2, 3}), Tensor::fromInts({0, 3}, {2}), 3), Error);
  EXPECT_THROW(TensorDataset(Tensor::zeros({2, 3}), Tensor::fromInts({0}, {1}), 3), Error);
}

TEST(SubsetDataset, MapsIndices) {
  auto base = std::make_shared<SyntheticDataset>(SyntheticConfig{.size = 50, .sampleShape = {4}});
  SubsetDataset sub(base, {10, 20, 30});
  EXPECT_EQ(sub.size(), 3);
  EXPECT_EQ(sub.label(1), base->label(20));
  std::vector<int64_t> a{2, 0}, b{30, 10};
  EXPECT_EQ(sub.batch(a).x.toVector(), base->batch(b).x.toVector());
  EXPECT_THROW(SubsetDataset(base, {50}), Error);
}

TEST(SyntheticDataset, DeterministicAndInRange) {
  SyntheticConfig cfg{.size = 1000, .seed = 42};
  SyntheticDataset a(cfg), b(cfg), other(SyntheticConfig{.size = 1000, .seed = 43});
  EXPECT_EQ(a.sampleShape(), (Shape{1, 28, 28}));
  std::vector<int64_t> idx{999, 3, 3, 500};
  Batch ba = a.batch(idx), bb = b.batch(idx);
  EXPECT_EQ(ba.x.toVector(), bb.x.toVector());
  EXPECT_EQ(ba.x.select(0, 1).toVector(), ba.x.select(0, 2).toVector());  // same index, same sample
  EXPECT_NE(ba.x.toVector(), other.batch(idx).x.toVector());
  for (float v : ba.x.toVector()) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(ba.y.data<int32_t>()[i], a.label(idx[i]));
  std::vector<int> perClass(10);
  for (int32_t y : labelsOf(a)) ++perClass.at(y);
  for (int c : perClass) EXPECT_GT(c, 60);  // roughly balanced
}

TEST(SyntheticDataset, LearnableByNearestPrototype) {
  // Class means estimated from one split classify another split almost perfectly.
  SyntheticDataset ds(SyntheticConfig{.size = 2000, .seed = 1});
  const int64_t d = ds.sampleNumel();
  Batch all = ds.range(0, 2000);
  const float* x = all.x.data<float>();
  const int32_t* y = all.y.data<int32_t>();
  std::vector<double> mean(10 * d);
  std::vector<int> count(10);
  for (int64_t i = 0; i < 1000; ++i) {
    ++count[y[i]];
    for (int64_t j = 0; j < d; ++j) mean[y[i] * d + j] += x[i * d + j];
  }
  for (int c = 0; c < 10; ++c)
    for (int64_t j = 0; j < d; ++j) mean[c * d + j] /= std::max(count[c], 1);
  int correct = 0;
  for (int64_t i = 1000; i < 2000; ++i) {
    int best = 0;
    double bestDist = 1e30;
    for (int c = 0; c < 10; ++c) {
      double dist = 0;
      for (int64_t j = 0; j < d; ++j)
        dist += (x[i * d + j] - mean[c * d + j]) * (x[i * d + j] - mean[c * d + j]);
      if (dist < bestDist) bestDist = dist, best = c;
    }
    correct += best == y[i];
  }
  EXPECT_GT(correct, 950);
}

TEST(SyntheticDataset, LoaderDeterministicAcrossPrefetch) {
  auto ds = std::make_shared<SyntheticDataset>(SyntheticConfig{.size = 256, .seed = 9});
  DistributedSampler s({.datasetSize = 256, .localBatch = 16, .worldSize = 1, .seed = 9});
  Loader sync(ds, s, 0, 0, {.prefetch = 0}), async(ds, s, 0, 0, {.prefetch = 2});
  Batch a, b;
  while (sync.next(a)) {
    ASSERT_TRUE(async.next(b));
    EXPECT_EQ(a.x.toVector(), b.x.toVector());
  }
  EXPECT_FALSE(async.next(b));
}

TEST(Partition, IidCoversEveryIndexOnce) {
  Parts parts = partitionIid(103, 4, 7);
  ASSERT_EQ(parts.size(), 4u);
  std::vector<int64_t> all;
  for (const auto& p : parts) {
    EXPECT_TRUE(p.size() == 25 || p.size() == 26);
    all.insert(all.end(), p.begin(), p.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> iota(103);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(all, iota);
  EXPECT_EQ(partitionIid(103, 4, 7), parts);
  EXPECT_NE(partitionIid(103, 4, 8), parts);
  EXPECT_THROW(partitionIid(3, 4, 0), UsageError);
}

TEST(Partition, ByLabelLimitsClassesPerPart) {
  SyntheticDataset ds(SyntheticConfig{.size = 2000, .sampleShape = {1}, .seed = 3});
  const auto labels = labelsOf(ds);
  Parts parts = partitionByLabel(labels, 10, 2, 5);
  ASSERT_EQ(parts.size(), 10u);
  std::vector<int64_t> all;
  for (const auto& p : parts) {
    std::set<int32_t> classes;
    for (int64_t i : p) classes.insert(labels[i]);
    // Two shards, each of which spans at most two adjacent classes.
    EXPECT_LE(classes.size(), 4u);
    EXPECT_EQ(p.size(), 200u);
    all.insert(all.end(), p.begin(), p.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 2000u);
  EXPECT_EQ(partitionByLabel(labels, 10, 2, 5), parts);
  EXPECT_THROW(partitionByLabel(labels, 1000, 3, 5), UsageError);
}
