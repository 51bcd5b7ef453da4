#include <gtest/gtest.h>

#include <filesystem>

#include "data/DataTestUtil.h"
#include "data/FashionMnist.h"
#include "data/IdxFile.h"

using namespace dtrain;
using namespace dtrain::data;
using test::errorOf;
using test::TempDir;

namespace {

void writeSplit(const TempDir& dir, const std::string& prefix, int64_t n, bool gz,
                std::vector<uint8_t> labels = {}) {
  std::vector<uint8_t> px(static_cast<size_t>(n * 4 * 4));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i % 256);
  if (labels.empty())
    for (int64_t i = 0; i < n; ++i) labels.push_back(static_cast<uint8_t>(i % 10));
  const std::string ext = gz ? ".gz" : "";
  writeIdx(dir.file(prefix + "-images-idx3-ubyte" + ext), {n, 4, 4}, px, gz);
  writeIdx(dir.file(prefix + "-labels-idx1-ubyte" + ext), {static_cast<int64_t>(labels.size())},
           labels, gz);
}

}  // namespace

TEST(FashionMnist, RealFiles) {
  if (!std::filesystem::is_directory(kFashionMnistDir))
    GTEST_SKIP() << kFashionMnistDir << " absent (apt-get install dataset-fashion-mnist)";
  for (bool train : {true, false}) {
    auto ds = loadFashionMnist(kFashionMnistDir, train);
    EXPECT_EQ(ds->size(), train ? 60000 : 10000);
    EXPECT_EQ(ds->sampleShape(), (Shape{1, 28, 28}));
    EXPECT_EQ(ds->numClasses(), 10);
    EXPECT_EQ(ds->images().shape(), (Shape{ds->size(), 1, 28, 28}));
    const float* x = ds->images().data<float>();
    float lo = 1, hi = 0;
    for (int64_t i = 0; i < ds->images().numel(); ++i)
      lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
    std::vector<int64_t> perClass(10);
    for (int32_t y : labelsOf(*ds)) {
      ASSERT_GE(y, 0);
      ASSERT_LT(y, 10);
      ++perClass[y];
    }
    for (int64_t c : perClass) EXPECT_EQ(c, ds->size() / 10);  // Fashion-MNIST is balanced
  }
}

TEST(FashionMnist, LoadsRawOrGzipNamesAndScalesLikeTorch) {
  TempDir dir;
  writeSplit(dir, "train", 20, true);
  writeSplit(dir, "t10k", 8, false);
  auto train = loadFashionMnist(dir.str(), true);
  auto test = loadFashionMnist(dir.str(), false);
  EXPECT_EQ(train->size(), 20);
  EXPECT_EQ(test->size(), 8);
  EXPECT_EQ(train->sampleShape(), (Shape{1, 4, 4}));
  const float* x = train->images().data<float>();
  for (int i = 0; i < 16 * 20; ++i) ASSERT_EQ(x[i], static_cast<float>(i % 256) / 255.0f);
  EXPECT_EQ(test->label(7), 7);
}

TEST(FashionMnist, MissingDirectorySaysHowToGetTheData) {
  const std::string dir = "/nonexistent/dtrain-fashion";
  std::string msg = errorOf<UsageError>([&] { loadFashionMnist(dir, true); });
  EXPECT_EQ(msg, "data directory " + dir +
                     " not found (install it with: apt-get install dataset-fashion-mnist, or pass "
                     "--data-dir)");
}

TEST(FashionMnist, MissingFileIsUsageError) {
  TempDir dir;
  writeSplit(dir, "train", 4, true);
  std::filesystem::remove(dir.file("train-labels-idx1-ubyte.gz"));
  std::string msg = errorOf<UsageError>([&] { loadFashionMnist(dir.str(), true); });
  EXPECT_CONTAINS(msg, "data directory " + dir.str() + " has no train-labels-idx1-ubyte");
  EXPECT_CONTAINS(msg, "apt-get install dataset-fashion-mnist");
}

TEST(FashionMnist, CountMismatchAndBadLabel) {
  TempDir dir;
  writeSplit(dir, "train", 5, false, {1, 2, 3});
  std::string msg = errorOf([&] { loadFashionMnist(dir.str(), true); });
  EXPECT_CONTAINS(msg, "train-images-idx3-ubyte has 5 images but file ");
  EXPECT_CONTAINS(msg, "train-labels-idx1-ubyte has 3 labels");

  writeSplit(dir, "t10k", 3, false, {1, 12, 3});
  msg = errorOf([&] { loadFashionMnist(dir.str(), false); });
  EXPECT_CONTAINS(
      msg, dir.file("t10k-labels-idx1-ubyte") + ": label 12 of sample 1 is not a class in [0, 10)");
}

TEST(FashionMnist, CorruptFileIsNamed) {
  TempDir dir;
  writeSplit(dir, "train", 4, false);
  test::writeBytes(dir.file("train-images-idx3-ubyte"), {0, 0, 8, 3, 0, 0, 0, 4});
  std::string msg = errorOf([&] { loadFashionMnist(dir.str(), true); });
  EXPECT_CONTAINS(msg, "file " + dir.file("train-images-idx3-ubyte") + ": truncated IDX header");
}
