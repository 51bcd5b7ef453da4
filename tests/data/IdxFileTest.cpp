#include <gtest/gtest.h>
#include <zlib.h>

#include "data/DataTestUtil.h"
#include "data/IdxFile.h"

using namespace dtrain;
using namespace dtrain::data;
using test::errorOf;
using test::TempDir;

namespace {

std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

// A valid 2 x 3 x 4 image file's bytes (raw IDX).
std::vector<uint8_t> imageBytes() {
  std::vector<uint8_t> b = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};
  auto px = ramp(24);
  b.insert(b.end(), px.begin(), px.end());
  return b;
}

}  // namespace

TEST(IdxFile, ReadsRawAndGzip) {
  TempDir dir;
  for (bool gz : {false, true}) {
    const std::string images = dir.file(gz ? "img.gz" : "img"), labels = dir.file("lab");
    writeIdx(images, {5, 2, 3}, ramp(30), gz);
    writeIdx(labels, {5}, {1, 2, 3, 4, 9}, gz);
    IdxArray a = readIdx(images, 3);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 2, 3}));
    EXPECT_EQ(a.count(), 5);
    EXPECT_EQ(a.data, ramp(30));
    IdxArray l = readIdx(labels, 1);
    EXPECT_EQ(l.dims, std::vector<int64_t>{5});
    EXPECT_EQ(l.data, (std::vector<uint8_t>{1, 2, 3, 4, 9}));
  }
}

TEST(IdxFile, DetectsGzipByContentNotName) {
  TempDir dir;
  writeIdx(dir.file("plain.gz"), {3}, {1, 2, 3}, false);  // ".gz" name, raw content
  writeIdx(dir.file("packed"), {3}, {4, 5, 6}, true);     // no ".gz", gzip content
  EXPECT_EQ(readIdx(dir.file("plain.gz")).data, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(readIdx(dir.file("packed")).data, (std::vector<uint8_t>{4, 5, 6}));
}

TEST(IdxFile, EmptyArrayAndLargeGzip) {
  TempDir dir;
  writeIdx(dir.file("empty"), {0, 28, 28}, {}, true);
  EXPECT_EQ(readIdx(dir.file("empty"), 3).count(), 0);
  // Larger than the decompressor's first buffer guess would be without the size hint.
  auto big = ramp(3 << 20);
  writeIdx(dir.file("big"), {3, 1024, 1024}, big, true);
  EXPECT_EQ(readIdx(dir.file("big"), 3).data, big);
}

TEST(IdxFile, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("nope-idx1-ubyte");
  std::string msg = errorOf([&] { readIdx(path); });
  EXPECT_CONTAINS(msg, "file " + path);
  EXPECT_CONTAINS(msg, "cannot open (No such file or directory)");
  msg = errorOf([&] { readIdx(dir.str()); });
  EXPECT_CONTAINS(msg, "file " + dir.str() + ": is a directory");
}

TEST(IdxFile, NotGzipAndNotIdx) {
  TempDir dir;
  const std::string path = dir.file("text");
  test::writeBytes(path, {'<', 'h', 't', 'm', 'l', '>'});
  std::string msg = errorOf([&] { readIdx(path); });
  EXPECT_CONTAINS(msg, "file " + path + ": not a gzip file and not an IDX file (bad magic");
  EXPECT_CONTAINS(msg, "3c 68 74 6d");
  test::writeBytes(path, {0});  // shorter than the magic
  EXPECT_CONTAINS(errorOf([&] { readIdx(path); }), "not a gzip file and not an IDX file");
  test::writeBytes(path, {});
  EXPECT_CONTAINS(errorOf([&] { readIdx(path); }), "not a gzip file and not an IDX file");
}

TEST(IdxFile, UnsupportedType) {
  TempDir dir;
  const std::string path = dir.file("floats");
  test::writeBytes(path, {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  std::string msg = errorOf([&] { readIdx(path); });
  EXPECT_CONTAINS(msg, "file " + path + ": unsupported IDX type code 0x0d (float32)");
  EXPECT_CONTAINS(msg, "only 0x08 (unsigned byte) is supported");
}

TEST(IdxFile, DimsCountMismatch) {
  TempDir dir;
  const std::string path = dir.file("labels");
  writeIdx(path, {4}, {0, 1, 2, 3}, true);
  std::string msg = errorOf([&] { readIdx(path, 3); });
  EXPECT_CONTAINS(msg, "file " + path + ": dims count mismatch");
  EXPECT_CONTAINS(msg, "expected a 3-dimensional IDX array (magic 0x00000803)");
  EXPECT_CONTAINS(msg, "found 1 dimension(s) (magic 0x00000801)");
  test::writeBytes(path, {0, 0, 8, 0});
  EXPECT_CONTAINS(errorOf([&] { readIdx(path); }), "declares 0 dimensions");
}

TEST(IdxFile, TruncatedHeaderAndData) {
  TempDir dir;
  const std::string path = dir.file("images");
  auto bytes = imageBytes();
  test::writeBytes(path, {bytes.begin(), bytes.begin() + 10});
  EXPECT_CONTAINS(
      errorOf([&] { readIdx(path, 3); }),
      "file " + path + ": truncated IDX header: 3 dimension sizes need 16 bytes, found 10");

  test::writeBytes(path, {bytes.begin(), bytes.end() - 5});
  EXPECT_CONTAINS(
      errorOf([&] { readIdx(path, 3); }),
      "file " + path + ": truncated: expected 24 bytes of pixel data for dims [2, 3, 4], found 19");
  test::writeBytes(path, {0, 0, 8, 1, 0, 0, 0, 3, 1});
  EXPECT_CONTAINS(errorOf([&] { readIdx(path, 1); }),
                  "expected 3 bytes of label data for dims [3], found 1");
}

TEST(IdxFile, TrailingGarbage) {
  TempDir dir;
  const std::string path = dir.file("images");
  auto bytes = imageBytes();
  bytes.push_back(42);
  bytes.push_back(43);
  test::writeBytes(path, bytes);
  EXPECT_CONTAINS(errorOf([&] { readIdx(path, 3); }),
                  "file " + path + ": trailing garbage: 2 bytes after the 24 bytes of pixel data");
}

TEST(IdxFile, CorruptGzipStream) {
  TempDir dir;
  const std::string good = dir.file("good.gz"), bad = dir.file("bad.gz");
  writeIdx(good, {64, 28, 28}, ramp(64 * 784), true);
  const auto gz = test::readBytes(good);
  ASSERT_GT(gz.size(), 100u);

  // Flipped bits inside the deflate data: a data error or a CRC mismatch.
  auto flipped = gz;
  for (size_t i = 20; i < 40; ++i) flipped[i] ^= 0x5A;
  test::writeBytes(bad, flipped);
  std::string msg = errorOf([&] { readIdx(bad, 3); });
  EXPECT_CONTAINS(msg, "file " + bad + ": corrupt gzip stream (");

  // Cut short.
  test::writeBytes(bad, {gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)});
  msg = errorOf([&] { readIdx(bad, 3); });
  EXPECT_CONTAINS(msg, "file " + bad + ": corrupt gzip stream (compressed data ends early");

  // Bad trailer checksum only.
  auto crc = gz;
  crc[crc.size() - 6] ^= 0xFF;
  test::writeBytes(bad, crc);
  EXPECT_CONTAINS(errorOf([&] { readIdx(bad, 3); }), "corrupt gzip stream (incorrect data check)");

  // Garbage after a complete gzip member.
  auto trailing = gz;
  trailing.insert(trailing.end(), {'j', 'u', 'n', 'k'});
  test::writeBytes(bad, trailing);
  EXPECT_CONTAINS(errorOf([&] { readIdx(bad, 3); }),
                  "file " + bad + ": trailing garbage after the gzip stream (4 bytes");
}

TEST(IdxFile, ConcatenatedGzipMembers) {
  TempDir dir;
  // gzip allows several members; their contents concatenate (e.g. `cat a.gz b.gz`).
  const auto bytes = imageBytes();
  const std::vector<uint8_t> head(bytes.begin(), bytes.begin() + 16),
      tail(bytes.begin() + 16, bytes.end());
  auto gzipOf = [&](const std::vector<uint8_t>& content, const std::string& name) {
    test::writeBytes(dir.file(name + ".raw"), content);
    gzFile f = gzopen(dir.file(name).c_str(), "wb");
    gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
    gzclose(f);
    return test::readBytes(dir.file(name));
  };
  auto joined = gzipOf(head, "h");
  auto second = gzipOf(tail, "t");
  joined.insert(joined.end(), second.begin(), second.end());
  test::writeBytes(dir.file("joined"), joined);
  EXPECT_EQ(readIdx(dir.file("joined"), 3).data, ramp(24));
}
