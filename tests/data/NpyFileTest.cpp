// The .npy reader and the npy and idx data sets (--dataset npy, --dataset idx):
// every dtype and header version, and every bad file a user can give.
#include <gtest/gtest.h>

#include <cstring>

#include "data/DataTestUtil.h"
#include "data/FashionMnist.h"
#include "data/IdxFile.h"
#include "data/NpyDataset.h"
#include "data/NpyFile.h"
#include "data/NpyTestData.h"

namespace dtrain::data {
namespace {

using dtrain::test::writeNpyOf;
using test::errorOf;
using test::TempDir;

TEST(NpyFile, ReadsAFileAsNumPyWritesIt) {
  // np.save of np.arange(6, dtype=np.float32).reshape(2, 3), byte for byte: the
  // header padded with spaces to a multiple of 64 bytes, ending in a newline.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  for (int i = 0; i < 6; ++i) {
    const float v = static_cast<float>(i);
    bytes.append(reinterpret_cast<const char*>(&v), 4);
  }
  TempDir dir;
  test::writeBytes(dir.file("a.npy"), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  const NpyHeader h = readNpyHeader(dir.file("a.npy"));
  EXPECT_EQ(h.descr, "<f4");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.dataOffset, 128);
  const Tensor x = readNpyFeatures(dir.file("a.npy"));
  ASSERT_EQ(x.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(x.data<float>()[i], static_cast<float>(i));
  // Our writer produces the same bytes.
  const std::vector<float> values{0, 1, 2, 3, 4, 5};
  writeNpyOf(dir.file("b.npy"), "<f4", {2, 3}, values);
  EXPECT_EQ(test::readBytes(dir.file("b.npy")), test::readBytes(dir.file("a.npy")));
}

TEST(NpyFile, FeatureDtypesRoundTripInEveryVersion) {
  TempDir dir;
  for (int major : {1, 2, 3}) {
    const std::string v = std::to_string(major);
    writeNpyOf(dir.file("f4.npy"), "<f4", {2, 2, 2},
               std::vector<float>{-1.5f, 0, 1, 2, 3, 4, 5, 1e30f}, major);
    writeNpyOf(dir.file("f8.npy"), "<f8", {4, 2}, std::vector<double>{0.1, -2, 3, 4, 5, 6, 7, 8},
               major);
    writeNpyOf(dir.file("u1.npy"), "|u1", {2, 4}, std::vector<uint8_t>{0, 1, 51, 255, 7, 8, 9, 10},
               major);
    EXPECT_EQ(readNpyHeader(dir.file("f8.npy")).major, major);

    Tensor f4 = readNpyFeatures(dir.file("f4.npy"));
    EXPECT_EQ(f4.shape(), (Shape{2, 2, 2})) << v;
    EXPECT_EQ(f4.data<float>()[0], -1.5f);
    EXPECT_EQ(f4.data<float>()[7], 1e30f);  // float values are kept, not scaled
    Tensor f8 = readNpyFeatures(dir.file("f8.npy"));
    EXPECT_EQ(f8.shape(), (Shape{4, 2}));
    EXPECT_EQ(f8.data<float>()[0], 0.1f);
    EXPECT_EQ(f8.data<float>()[1], -2.0f);
    Tensor u1 = readNpyFeatures(dir.file("u1.npy"));
    EXPECT_EQ(u1.data<float>()[2], 51.0f / 255.0f);  // uint8 is scaled as IDX pixels are
    EXPECT_EQ(u1.data<float>()[3], 1.0f);
  }
}

TEST(NpyFile, OneDimensionalFeaturesAreOneFeaturePerSample) {
  TempDir dir;
  writeNpyOf(dir.file("x.npy"), "<f4", {3}, std::vector<float>{1, 2, 3});
  EXPECT_EQ(readNpyFeatures(dir.file("x.npy")).shape(), (Shape{3, 1}));
}

TEST(NpyFile, LabelDtypesRoundTrip) {
  TempDir dir;
  writeNpyOf(dir.file("i8.npy"), "<i8", {3}, std::vector<int64_t>{0, 7, 65535});
  writeNpyOf(dir.file("i4.npy"), "<i4", {3}, std::vector<int32_t>{2, 0, 1}, 2);
  writeNpyOf(dir.file("u1.npy"), "|u1", {4}, std::vector<uint8_t>{255, 0, 3, 3}, 3);
  EXPECT_EQ(readNpyLabels(dir.file("i8.npy")), (std::vector<int32_t>{0, 7, 65535}));
  EXPECT_EQ(readNpyLabels(dir.file("i4.npy")), (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(readNpyLabels(dir.file("u1.npy")), (std::vector<int32_t>{255, 0, 3, 3}));
}

TEST(NpyFile, BadFilesAreUsageErrorsNamingTheFile) {
  TempDir dir;
  const std::string f = dir.file("bad.npy");
  const auto features = [&] {
    return errorOf<UsageError>([&] { readNpyFeatures(f, "--train-data " + f); });
  };
  const auto labels = [&] {
    return errorOf<UsageError>([&] { readNpyLabels(f, "--train-labels " + f); });
  };

  EXPECT_EQ(features(), "--train-data " + f + ": no such file");

  test::writeBytes(f, {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0});  // e.g. an .npz (a zip)
  EXPECT_EQ(features(), "--train-data " + f +
                            ": not a .npy file (bad magic: first bytes [50 4b 03 04 00 00], "
                            "expected 93 4e 55 4d 50 59, \"\\x93NUMPY\")");

  writeNpyOf(f, "<f4", {2}, std::vector<float>{1, 2});
  auto bytes = test::readBytes(f);
  bytes[6] = 4;
  test::writeBytes(f, bytes);
  EXPECT_CONTAINS(features(), "unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)");

  writeNpyOf(f, "<f4", {3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  bytes = test::readBytes(f);
  bytes.resize(bytes.size() - 3);
  test::writeBytes(f, bytes);
  EXPECT_EQ(features(), "--train-data " + f +
                            ": truncated: shape (3, 2) of '<f4' needs 24 bytes of data, found 21");
  bytes.resize(20);
  test::writeBytes(f, bytes);
  EXPECT_CONTAINS(features(), "truncated .npy header");

  writeNpyOf(f, "<f4", {1}, std::vector<float>{1, 2});
  EXPECT_CONTAINS(features(), ": trailing garbage: 4 bytes after the 4 bytes of data");

  writeNpyOf(f, "<i2", {2}, std::vector<int16_t>{1, 2});
  EXPECT_EQ(features(), "--train-data " + f +
                            ": unsupported feature dtype '<i2' (supported: float32 <f4, float64 "
                            "<f8, uint8 |u1)");
  writeNpyOf(f, "<f4", {2}, std::vector<float>{1, 2});
  EXPECT_EQ(labels(), "--train-labels " + f +
                          ": unsupported label dtype '<f4' (supported: int64 <i8, int32 <i4, "
                          "uint8 |u1)");
  writeNpyOf(f, "[('a', '<f4')]", {2}, std::vector<float>{1, 2});
  EXPECT_CONTAINS(features(), "unsupported dtype: a structured array");

  writeNpyOf(f, ">f4", {2}, std::vector<float>{1, 2});
  EXPECT_CONTAINS(features(), ": big-endian data (dtype '>f4') is not supported");
  writeNpyOf(f, ">i8", {2}, std::vector<int64_t>{1, 2});
  EXPECT_CONTAINS(labels(), ": big-endian data (dtype '>i8') is not supported");

  const std::vector<float> six{1, 2, 3, 4, 5, 6};
  writeNpy(f, "<f4", {3, 2}, six.data(), 24, 1, /*fortranOrder=*/true);
  EXPECT_CONTAINS(features(), ": Fortran-order arrays are not supported");

  writeNpyOf(f, "<f4", {}, std::vector<float>{1});
  EXPECT_CONTAINS(features(), ": a scalar, expected features [N, ...]");
  writeNpyOf(f, "<f4", {0, 2}, std::vector<float>{});
  EXPECT_CONTAINS(features(), ": no samples (shape (0, 2))");

  writeNpyOf(f, "<i8", {3}, std::vector<int64_t>{0, -1, 2});
  EXPECT_EQ(labels(),
            "--train-labels " + f +
                ": label -1 of sample 1 is negative (class labels are 0, 1, ... below 65536)");
  writeNpyOf(f, "<i4", {2}, std::vector<int32_t>{0, 70000});
  EXPECT_CONTAINS(labels(), ": label 70000 of sample 1 is out of range");
  writeNpyOf(f, "<i8", {2, 1}, std::vector<int64_t>{0, 1});
  EXPECT_CONTAINS(labels(),
                  "labels must be one class index per sample, shape (N,), got (2, 1) "
                  "(save y.ravel())");

  std::filesystem::create_directories(dir.file("d.npy"));
  EXPECT_CONTAINS(errorOf<UsageError>([&] { readNpyFeatures(dir.file("d.npy")); }),
                  "file " + dir.file("d.npy") + ": is a directory");
}

TEST(NpyDataset, ClassesComeFromTheTrainingLabels) {
  TempDir dir;
  writeNpyOf(dir.file("x.npy"), "|u1", {4, 1, 2, 2}, std::vector<uint8_t>(16, 255));
  writeNpyOf(dir.file("y.npy"), "<i4", {4}, std::vector<int32_t>{0, 4, 2, 1});
  const NpyFiles train{dir.file("x.npy"), dir.file("y.npy"), "", ""};
  auto ds = loadNpyDataset(train);
  EXPECT_EQ(ds->size(), 4);
  EXPECT_EQ(ds->sampleShape(), (Shape{1, 2, 2}));
  EXPECT_EQ(ds->numClasses(), 5);
  EXPECT_EQ(ds->label(1), 4);
  EXPECT_EQ(ds->images().data<float>()[0], 1.0f);
  const DatasetSpec spec = npySpec(train);
  EXPECT_EQ(spec.sampleShape, (Shape{1, 2, 2}));
  EXPECT_EQ(spec.numClasses, 5);
}

TEST(NpyDataset, MismatchesAreNamed) {
  TempDir dir;
  writeNpyOf(dir.file("x.npy"), "<f4", {3, 2}, std::vector<float>(6, 0.5f));
  writeNpyOf(dir.file("y.npy"), "<i8", {2}, std::vector<int64_t>{0, 1});
  const NpyFiles files{dir.file("x.npy"), dir.file("y.npy"), "--train-data x.npy",
                       "--train-labels y.npy"};
  EXPECT_EQ(errorOf<UsageError>([&] { loadNpyDataset(files); }),
            "--train-labels y.npy has 2 labels but --train-data x.npy has 3 samples");

  // A test set must have the training samples' shape and classes.
  writeNpyOf(dir.file("y.npy"), "<i8", {3}, std::vector<int64_t>{0, 1, 2});
  const NpyFiles test{dir.file("x.npy"), dir.file("y.npy"), "--test-data x.npy",
                      "--test-labels y.npy"};
  EXPECT_EQ(errorOf<UsageError>([&] {
              loadNpyDataset(test, {{3}, 3});
            }),
            "--test-data x.npy: samples of shape [2] but the training samples are [3]");
  EXPECT_EQ(
      errorOf<UsageError>([&] {
        loadNpyDataset(test, {{2}, 2});
      }),
      "--test-labels y.npy: label 2 of sample 2 is not a class of the training labels [0, 2)");
  EXPECT_EQ(loadNpyDataset(test, {{2}, 4})->numClasses(), 4);
}

TEST(IdxDirectory, ShapeAndClassesComeFromTheFiles) {
  TempDir dir;
  dtrain::test::writeBandsIdx(dir.str(), "train", 30, 9, 1);
  dtrain::test::writeBandsIdx(dir.str(), "t10k", 12, 9, 2);
  const DatasetSpec spec = idxDirectorySpec(dir.str());
  EXPECT_EQ(spec.sampleShape, (Shape{1, 9, 9}));
  EXPECT_EQ(spec.numClasses, 3);
  EXPECT_EQ(readIdxDims(dir.file("t10k-labels-idx1-ubyte.gz")), (std::vector<int64_t>{12}));
  auto train = loadIdxDirectory(dir.str(), true);
  auto test = loadIdxDirectory(dir.str(), false, spec);
  EXPECT_EQ(train->size(), 30);
  EXPECT_EQ(test->size(), 12);
  EXPECT_EQ(train->numClasses(), 3);
  EXPECT_EQ(train->sampleShape(), (Shape{1, 9, 9}));

  // Test images of another size than the training images'.
  dtrain::test::writeBandsIdx(dir.str(), "t10k", 12, 6, 2);
  EXPECT_CONTAINS(errorOf<UsageError>([&] { loadIdxDirectory(dir.str(), false, spec); }),
                  "t10k-images-idx3-ubyte: images of shape [1, 6, 6] but the training images "
                  "are [1, 9, 9]");
  // A missing split names the files --dataset idx reads.
  std::filesystem::remove(dir.file("t10k-images-idx3-ubyte"));
  EXPECT_CONTAINS(
      errorOf<UsageError>([&] { loadIdxDirectory(dir.str(), false, spec); }),
      "has no t10k-images-idx3-ubyte or t10k-images-idx3-ubyte.gz (--dataset idx reads");
  // A header that is not IDX.
  test::writeBytes(dir.file("train-images-idx3-ubyte"), {'h', 'e', 'l', 'l', 'o'});
  EXPECT_CONTAINS(errorOf<UsageError>([&] { idxDirectorySpec(dir.str()); }),
                  "not a gzip file and not an IDX file");
}

}  // namespace
}  // namespace dtrain::data
