// --augment crop,flip on the loader: each output is a padded crop and/or a
// mirror of its input, the draws vary across samples, and the global-batch
// rule holds (1 worker x 2B and 2 workers x B see identical augmented batches).
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "core/Error.h"
#include "data/Augment.h"
#include "data/Loader.h"

using namespace dtrain;
using namespace dtrain::data;

namespace {

// n images [2, 5, 6] with distinct, nonzero pixels (so a shift or a mirror is recognizable).
std::shared_ptr<TensorDataset> augmentImages(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n * 60));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i);
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<int32_t>(i % 3);
  return std::make_shared<TensorDataset>(Tensor::fromVector(x, {n, 2, 5, 6}),
                                         Tensor::fromInts(y, {n}), 3);
}

// The (dy, dx, mirror) that turns `in` into `out` ([2, 5, 6], padding p), or none.
std::vector<std::tuple<int, int, bool>> explanations(const float* in, const float* out, int p) {
  std::vector<std::tuple<int, int, bool>> found;
  for (int dy = -p; dy <= p; ++dy)
    for (int dx = -p; dx <= p; ++dx)
      for (bool mirror : {false, true}) {
        bool same = true;
        for (int c = 0; c < 2 && same; ++c)
          for (int yy = 0; yy < 5 && same; ++yy)
            for (int xx = 0; xx < 6 && same; ++xx) {
              const int sy = yy + dy, sx = (mirror ? 5 - xx : xx) + dx;
              const float want = sy >= 0 && sy < 5 && sx >= 0 && sx < 6 ? in[c * 30 + sy * 6 + sx] : 0.0f;
              same = out[c * 30 + yy * 6 + xx] == want;
            }
        if (same) found.emplace_back(dy, dx, mirror);
      }
  return found;
}

TEST(Augment, ParsesTheNamesAndRefusesOthers) {
  EXPECT_FALSE(parseAugment("").any());
  EXPECT_FALSE(parseAugment("none").any());
  const auto both = parseAugment("flip,crop");
  EXPECT_TRUE(both.crop && both.flip);
  EXPECT_TRUE(parseAugment("crop").crop && !parseAugment("crop").flip);
  EXPECT_THROW(parseAugment("rotate"), UsageError);
  EXPECT_THROW(parseAugment("crop,"), UsageError);
  EXPECT_THROW(checkAugmentable(both, {784}), UsageError);
  EXPECT_NO_THROW(checkAugmentable(both, {3, 32, 32}));
  EXPECT_NO_THROW(checkAugmentable(parseAugment(""), {784}));
}

TEST(Augment, EachSampleIsAPaddedCropOrMirrorAndTheDrawsVary) {
  auto ds = augmentImages(64);
  for (const char* spec : {"crop", "flip", "crop,flip"}) {
    SCOPED_TRACE(spec);
    AugmentOptions o = parseAugment(spec);
    o.padding = 2;
    o.seed = 9;
    Batch plain = ds->range(0, 64), b = ds->range(0, 64);
    augmentSamples(o, ds->sampleShape(), b.x.data<float>(), 64, 0, 3, 0);
    std::set<std::tuple<int, int, bool>> seen;
    for (int i = 0; i < 64; ++i) {
      const auto e = explanations(plain.x.data<float>() + i * 60, b.x.data<float>() + i * 60, 2);
      ASSERT_EQ(e.size(), 1u) << "sample " << i;
      const auto [dy, dx, mirror] = e[0];
      if (!o.crop) EXPECT_TRUE(dy == 0 && dx == 0);
      if (!o.flip) EXPECT_FALSE(mirror);
      seen.insert(e[0]);
    }
    // 64 samples: flip alone shows both outcomes, crop many of its 25 offsets.
    EXPECT_GE(seen.size(), o.crop ? 10u : 2u);
  }
}

TEST(Augment, OneWorkerTwiceTheBatchSeesWhatTwoWorkersSee) {
  auto ds = augmentImages(96);
  LoaderOptions lo;
  lo.prefetch = 1;
  lo.augment = parseAugment("crop,flip");
  lo.augment.seed = 4;
  DistributedSampler one({96, 16, 1, 4, true}), two({96, 8, 2, 4, true});
  for (int64_t epoch : {0, 1}) {
    Loader whole(ds, one, 0, epoch, lo), r0(ds, two, 0, epoch, lo), r1(ds, two, 1, epoch, lo);
    int steps = 0;
    for (Batch w, a, b; whole.next(w);) {
      ASSERT_TRUE(r0.next(a) && r1.next(b));
      const std::vector<float> all = w.x.toVector(), lo0 = a.x.toVector(), hi1 = b.x.toVector();
      ASSERT_EQ(all.size(), lo0.size() + hi1.size());
      EXPECT_TRUE(std::equal(lo0.begin(), lo0.end(), all.begin())) << "step " << steps;
      EXPECT_TRUE(std::equal(hi1.begin(), hi1.end(), all.begin() + lo0.size())) << "step " << steps;
      ++steps;
    }
    EXPECT_EQ(steps, 6);
  }
  // And the augmentation did something: the unaugmented first batch differs.
  Loader augmented(ds, one, 0, 0, lo), plain(ds, one, 0, 0, {});
  Batch a, p;
  ASSERT_TRUE(augmented.next(a) && plain.next(p));
  EXPECT_NE(a.x.toVector(), p.x.toVector());
  // A resumed loader (start step 2) draws what the uninterrupted one drew.
  LoaderOptions resumed = lo;
  resumed.startStep = 2;
  Loader from2(ds, one, 0, 1, resumed), full(ds, one, 0, 1, lo);
  Batch f, g;
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(full.next(f));
  ASSERT_TRUE(from2.next(g));
  EXPECT_EQ(f.x.toVector(), g.x.toVector());
}

}  // namespace
