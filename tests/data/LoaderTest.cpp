#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "data/DataTestUtil.h"
#include "data/Loader.h"

using namespace dtrain;
using namespace dtrain::data;

namespace {

// Sample i is filled with the value i and labelled i % 10, so a batch shows which indices
// it holds. Optionally slow, or failing at one index.
class IndexDataset : public Dataset {
 public:
  explicit IndexDataset(int64_t n, int64_t failAt = -1, int sleepMs = 0)
      : n_(n), failAt_(failAt), sleepMs_(sleepMs) {}
  int64_t size() const override { return n_; }
  const Shape& sampleShape() const override { return shape_; }
  int numClasses() const override { return 10; }
  int32_t label(int64_t i) const override { return static_cast<int32_t>(i % 10); }
  void gather(const int64_t* idx, int64_t count, float* x, int32_t* y) const override {
    ++gathers;
    if (sleepMs_) std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs_));
    for (int64_t i = 0; i < count; ++i) {
      if (idx[i] == failAt_) throw Error("bad sample " + std::to_string(idx[i]));
      for (int j = 0; j < 3; ++j) x[i * 3 + j] = static_cast<float>(idx[i]);
      y[i] = label(idx[i]);
    }
  }
  mutable std::atomic<int> gathers{0};

 private:
  int64_t n_, failAt_;
  int sleepMs_;
  Shape shape_{3};
};

std::vector<int64_t> indicesOf(const Batch& b) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < b.size(); ++i) {
    const float* x = b.x.data<float>() + i * 3;
    EXPECT_EQ(x[0], x[2]);
    EXPECT_EQ(b.y.data<int32_t>()[i], static_cast<int32_t>(x[0]) % 10);
    v.push_back(static_cast<int64_t>(x[0]));
  }
  return v;
}

DistributedSampler sampler(int64_t n, int64_t batch, int world, bool shuffle = true) {
  return DistributedSampler(
      {.datasetSize = n, .localBatch = batch, .worldSize = world, .seed = 3, .shuffle = shuffle});
}

}  // namespace

TEST(Loader, OrderEqualsSamplerWithAndWithoutPrefetch) {
  auto ds = std::make_shared<IndexDataset>(250);
  const auto s = sampler(250, 6, 3);
  for (int depth : {0, 1, 2, 4}) {
    for (int rank = 0; rank < 3; ++rank) {
      Loader loader(ds, s, rank, /*epoch=*/2, {.prefetch = depth});
      int64_t step = 0;
      for (Batch b; loader.next(b); ++step) {
        ASSERT_EQ(b.x.shape(), (Shape{6, 3}));
        ASSERT_EQ(b.y.shape(), (Shape{6}));
        ASSERT_EQ(indicesOf(b), s.indices(2, step, rank)) << "depth " << depth << " step " << step;
        EXPECT_EQ(loader.step(), step + 1);
      }
      EXPECT_EQ(step, s.stepsPerEpoch());
      Batch b;
      EXPECT_FALSE(loader.next(b));  // stays exhausted
    }
  }
}

TEST(Loader, ResumesAtStartStep) {
  auto ds = std::make_shared<IndexDataset>(100);
  const auto s = sampler(100, 4, 2);
  for (int depth : {0, 2}) {
    Loader loader(ds, s, 1, 5, {.startStep = 7, .prefetch = depth});
    EXPECT_EQ(loader.step(), 7);
    Batch b;
    ASSERT_TRUE(loader.next(b));
    EXPECT_EQ(indicesOf(b), s.indices(5, 7, 1));
    Loader atEnd(ds, s, 1, 5, {.startStep = s.stepsPerEpoch(), .prefetch = depth});
    EXPECT_FALSE(atEnd.next(b));
  }
  EXPECT_THROW(Loader(ds, s, 0, 0, {.startStep = s.stepsPerEpoch() + 1}), Error);
  EXPECT_THROW(Loader(ds, s, 2, 0), Error);
  EXPECT_THROW(Loader(std::make_shared<IndexDataset>(99), s, 0, 0), Error);
}

TEST(Loader, RanksAsThreadsCoverTheGlobalBatch) {
  auto ds = std::make_shared<IndexDataset>(300);
  const auto s = sampler(300, 5, 4);
  std::vector<std::vector<std::vector<int64_t>>> got(4);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] {
      Loader loader(ds, s, r, 1);
      for (Batch b; loader.next(b);) got[r].push_back(indicesOf(b));
    });
  for (auto& t : ranks) t.join();
  for (int64_t step = 0; step < s.stepsPerEpoch(); ++step) {
    std::vector<int64_t> joined;
    for (int r = 0; r < 4; ++r)
      joined.insert(joined.end(), got[r][step].begin(), got[r][step].end());
    EXPECT_EQ(joined, s.globalIndices(1, step));
  }
}

TEST(Loader, DestroyedMidEpochIsClean) {
  auto ds = std::make_shared<IndexDataset>(1000, -1, /*sleepMs=*/2);
  const auto s = sampler(1000, 10, 1);
  {
    Loader untouched(ds, s, 0, 0);  // producer blocked on a full queue or mid-gather
  }
  {
    Loader loader(ds, s, 0, 0, {.prefetch = 3});
    Batch b;
    ASSERT_TRUE(loader.next(b));
    ASSERT_TRUE(loader.next(b));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the queue fill
  }
  // The producer stopped: no gathers continue after destruction.
  const int after = ds->gathers.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ds->gathers.load(), after);
  EXPECT_LT(after, 20);
}

TEST(Loader, ProducerExceptionIsRethrownInOrder) {
  const auto s = sampler(100, 10, 1, /*shuffle=*/false);
  for (int depth : {0, 2}) {
    auto ds = std::make_shared<IndexDataset>(100, /*failAt=*/35);
    Loader loader(ds, s, 0, 0, {.prefetch = depth});
    Batch b;
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(loader.next(b));  // 0..29 are fine
    EXPECT_EQ(test::errorOf([&] { loader.next(b); }), "bad sample 35");
  }
}

TEST(Loader, RecyclesBuffersOnlyWhenReleased) {
  auto ds = std::make_shared<IndexDataset>(400);
  const auto s = sampler(400, 8, 1);
  for (int depth : {0, 2}) {
    // Dropping each batch before the next: a handful of buffers serve the whole epoch.
    std::set<const void*> buffers;
    {
      Loader loader(ds, s, 0, 0, {.prefetch = depth});
      for (Batch b; loader.next(b);) buffers.insert(b.x.rawData());
    }
    EXPECT_LE(buffers.size(), static_cast<size_t>(depth + 4));
    // Holding every batch: none is overwritten.
    std::vector<Batch> kept;
    {
      Loader loader(ds, s, 0, 0, {.prefetch = depth});
      for (Batch b; loader.next(b);) kept.push_back(b);
    }
    ASSERT_EQ(static_cast<int64_t>(kept.size()), s.stepsPerEpoch());
    for (int64_t step = 0; step < s.stepsPerEpoch(); ++step)
      EXPECT_EQ(indicesOf(kept[step]), s.indices(0, step, 0));
  }
}
