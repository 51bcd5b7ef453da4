// Byte-level text data: corpus loading and split, the window batcher's sampler contract,
// the fixed validation batches, errors, and the kjv corpus materialization.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "data/DataTestUtil.h"
#include "data/KjvCorpus.h"
#include "data/Md5.h"
#include "data/TextBatcher.h"
#include "data/TextCorpus.h"

using namespace dtrain;
using namespace dtrain::data;
using namespace dtrain::data::test;
namespace fs = std::filesystem;

namespace {

// n pseudo-random bytes (a fixed LCG, so windows at different offsets differ).
std::vector<uint8_t> noise(int64_t n, uint32_t seed = 1) {
  std::vector<uint8_t> b(static_cast<size_t>(n));
  for (auto& v : b) v = static_cast<uint8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
  return b;
}

std::shared_ptr<const TextCorpus> corpusOf(int64_t n) {
  return std::make_shared<const TextCorpus>(noise(n), "test corpus");
}

TextBatcher batcher(std::shared_ptr<const TextCorpus> c, int64_t B, int W, int64_t block,
                    bool shuffle, uint64_t seed = 7) {
  return TextBatcher(
      std::move(c),
      {.localBatch = B, .worldSize = W, .block = block, .seed = seed, .shuffle = shuffle});
}

std::vector<int32_t> ints(const Tensor& t) {
  return {t.data<int32_t>(), t.data<int32_t>() + t.numel()};
}

// Rows of `b` appended after those of `a` (both I32 [*, block]).
std::vector<int32_t> concatRows(const std::vector<Batch>& parts, bool targets) {
  std::vector<int32_t> out;
  for (const auto& p : parts) {
    auto v = ints(targets ? p.y : p.x);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Expects row b of batch to be the window of split at offsets[b], and y to be x shifted.
void expectWindows(const Batch& batch, std::span<const uint8_t> split,
                   const std::vector<int64_t>& offsets, int64_t block) {
  ASSERT_EQ(batch.x.shape(), (Shape{static_cast<int64_t>(offsets.size()), block}));
  ASSERT_EQ(batch.y.shape(), batch.x.shape());
  ASSERT_EQ(batch.x.dtype(), DType::I32);
  ASSERT_EQ(batch.y.dtype(), DType::I32);
  const int32_t* x = batch.x.data<int32_t>();
  const int32_t* y = batch.y.data<int32_t>();
  for (size_t b = 0; b < offsets.size(); ++b) {
    ASSERT_GE(offsets[b], 0);
    ASSERT_LE(offsets[b] + block + 1, static_cast<int64_t>(split.size()));
    for (int64_t i = 0; i < block; ++i) {
      ASSERT_EQ(x[b * block + i], split[offsets[b] + i]) << "row " << b << " pos " << i;
      ASSERT_EQ(y[b * block + i], split[offsets[b] + i + 1]) << "row " << b << " pos " << i;
    }
  }
}

bool onPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string dirs = path;
  for (size_t begin = 0; begin <= dirs.size();) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const fs::path p = fs::path(dirs.substr(begin, end - begin)) / program;
    if (::access(p.c_str(), X_OK) == 0) return true;
    begin = end + 1;
  }
  return false;
}

// An executable shell script standing in for `bible`.
std::string fakeProgram(const TempDir& dir, const std::string& body) {
  const std::string path = dir.file("fake-bible");
  const std::string text = "#!/bin/sh\n" + body + "\n";
  writeBytes(path, {text.begin(), text.end()});
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace

TEST(Md5, MatchesReferenceDigests) {
  const auto md5 = [](const std::string& s) {
    return md5Hex({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  };
  EXPECT_EQ(md5(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  // Padding boundaries: 55 bytes fit one block, 56 need two, 64 is a whole block.
  EXPECT_EQ(md5(std::string(55, 'a')), "ef1772b6dff9a122358552954ad0df65");
  EXPECT_EQ(md5(std::string(56, 'a')), "3b0c8ac703f828b04c6c197006d17218");
  EXPECT_EQ(md5(std::string(64, 'a')), "014842d480b571495a4a0363793f7367");
  std::vector<uint8_t> all;
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 256; ++i) all.push_back(static_cast<uint8_t>(i));
  EXPECT_EQ(md5Hex(all), "e6899eaaf06fd702f3ed3f988eb19362");
}

TEST(TextCorpus, SplitsLikeThePeer) {
  EXPECT_EQ(TextCorpus::trainSizeFor(kKjvBytes), 3868415);  // Python: int(0.9 * 4298239)
  EXPECT_EQ(TextCorpus::trainSizeFor(10), 9);
  EXPECT_EQ(TextCorpus::trainSizeFor(1), 0);
  const auto c = corpusOf(1005);
  EXPECT_EQ(c->size(), 1005);
  EXPECT_EQ(c->trainSize(), 904);
  EXPECT_EQ(c->validationSize(), 101);
  EXPECT_EQ(c->train().data(), c->bytes().data());
  EXPECT_EQ(c->validation().data(), c->bytes().data() + 904);
  EXPECT_EQ(c->validation().size(), 101u);
}

TEST(TextCorpus, FromFileReadsEveryByte) {
  TempDir dir;
  const auto bytes = noise(70000);  // more than one read chunk
  writeBytes(dir.file("t.bin"), bytes);
  const auto c = TextCorpus::fromFile(dir.file("t.bin"));
  EXPECT_EQ(c->name(), dir.file("t.bin"));
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), c->bytes().begin(), c->bytes().end()));
  EXPECT_EQ(c->trainSize(), 63000);
  // loadTextCorpus with a path never touches kjv.
  EXPECT_EQ(loadTextCorpus(dir.file("t.bin"))->size(), 70000);
}

TEST(TextCorpus, FileErrors) {
  TempDir dir;
  auto m = errorOf<UsageError>([&] { TextCorpus::fromFile(dir.file("nope.txt")); });
  EXPECT_CONTAINS(m, dir.file("nope.txt"));
  EXPECT_CONTAINS(m, "does not exist");
  m = errorOf<UsageError>([&] { TextCorpus::fromFile(dir.str()); });
  EXPECT_CONTAINS(m, "is a directory");
  writeBytes(dir.file("empty.txt"), {});
  m = errorOf<UsageError>([&] { TextCorpus::fromFile(dir.file("empty.txt")); });
  EXPECT_CONTAINS(m, dir.file("empty.txt"));
  EXPECT_CONTAINS(m, "is empty");
  EXPECT_CONTAINS(errorOf<UsageError>([] { TextCorpus({}, "x"); }), "text corpus x is empty");
}

TEST(TextCorpus, SplitsShorterThanOneWindow) {
  // 100 bytes: train 90, validation 10.
  const auto c = corpusOf(100);
  EXPECT_NO_THROW(c->requireWindows(9));  // 10 validation bytes = one window of 9 + 1
  auto m = errorOf<UsageError>([&] { c->requireWindows(10); });
  EXPECT_CONTAINS(m, "validation split");
  EXPECT_CONTAINS(m, "has 10 bytes");
  EXPECT_CONTAINS(m, "block + 1 = 11");
  m = errorOf<UsageError>([&] { c->requireWindows(90); });
  EXPECT_CONTAINS(m, "training split");
  EXPECT_CONTAINS(m, "has 90 bytes");
  EXPECT_CONTAINS(m, "block + 1 = 91");
  EXPECT_CONTAINS(errorOf<UsageError>([&] { c->requireWindows(0); }), "block");
  // The batcher and the evaluation batches check it too.
  EXPECT_CONTAINS(errorOf<UsageError>([&] { batcher(c, 2, 1, 10, true); }), "validation split");
  EXPECT_CONTAINS(errorOf<UsageError>([&] { textEvalBatches(*c, {.batch = 2, .block = 64}); }),
                  "validation split");
}

TEST(TextBatcher, ConfigErrors) {
  const auto c = corpusOf(1000);
  EXPECT_CONTAINS(errorOf<UsageError>([&] { batcher(c, 0, 1, 8, true); }), "batch size");
  EXPECT_CONTAINS(errorOf<UsageError>([&] { batcher(c, 2, 0, 8, true); }), "workers");
  const auto b = batcher(c, 2, 2, 8, true);
  EXPECT_CONTAINS(errorOf([&] { b.offsets(0, 2); }), "rank 2 out of range");
  EXPECT_CONTAINS(errorOf([&] { b.offsets(-1, 0); }), "step must be >= 0");
}

TEST(TextBatcher, TargetsAreInputsShiftedByOne) {
  const auto c = corpusOf(5000);
  for (bool shuffle : {true, false}) {
    const auto b = batcher(c, 5, 2, 16, shuffle);
    for (int64_t step : {0, 1, 13})
      for (int r = 0; r < 2; ++r)
        expectWindows(b.batch(step, r), c->train(), b.offsets(step, r), 16);
  }
}

TEST(TextBatcher, UnionOfWorkersEqualsSingleWorkerBatch) {
  const auto c = corpusOf(20000);
  const int64_t B = 3, block = 12;
  for (bool shuffle : {true, false}) {
    for (int W : {2, 3, 4}) {
      const auto multi = batcher(c, B, W, block, shuffle);
      const auto single = batcher(c, W * B, 1, block, shuffle);
      EXPECT_EQ(multi.stepsPerEpoch(), single.stepsPerEpoch());
      for (int64_t step : {0, 1, 2, 57, 1000}) {
        std::vector<int64_t> joined;
        std::vector<Batch> parts;
        for (int r = 0; r < W; ++r) {
          const auto local = multi.offsets(step, r);
          ASSERT_EQ(static_cast<int64_t>(local.size()), B);
          joined.insert(joined.end(), local.begin(), local.end());
          parts.push_back(multi.batch(step, r));
        }
        EXPECT_EQ(joined, single.offsets(step, 0)) << "W=" << W << " step=" << step;
        EXPECT_EQ(joined, multi.globalOffsets(step));
        const Batch whole = single.batch(step, 0);
        EXPECT_EQ(concatRows(parts, false), ints(whole.x)) << "W=" << W << " step=" << step;
        EXPECT_EQ(concatRows(parts, true), ints(whole.y)) << "W=" << W << " step=" << step;
      }
    }
  }
}

TEST(TextBatcher, DeterministicPerSeedAndStep) {
  const auto c = corpusOf(100000);
  const auto a = batcher(c, 8, 2, 32, true, 1337);
  const auto again = batcher(c, 8, 2, 32, true, 1337);
  const auto other = batcher(c, 8, 2, 32, true, 1338);
  for (int64_t step : {0, 5, 99}) {
    EXPECT_EQ(a.globalOffsets(step), again.globalOffsets(step));
    EXPECT_EQ(ints(a.batch(step, 1).x), ints(again.batch(step, 1).x));
    EXPECT_NE(a.globalOffsets(step), other.globalOffsets(step)) << "step " << step;
  }
  EXPECT_NE(a.globalOffsets(0), a.globalOffsets(1));
  // Resuming: a step's batch does not depend on the steps drawn before it.
  const auto fresh = batcher(c, 8, 2, 32, true, 1337);
  EXPECT_EQ(fresh.offsets(99, 1), a.offsets(99, 1));
}

TEST(TextBatcher, ShuffledOffsetsCoverTheWholeTrainSplit) {
  // train 90 bytes, block 8: offsets 0..81, all of them reachable and none beyond.
  const auto c = corpusOf(100);
  const auto b = batcher(c, 16, 1, 8, true);
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 200; ++step)
    for (int64_t o : b.globalOffsets(step)) {
      ASSERT_TRUE(o >= 0 && o <= 81) << o;
      seen.insert(o);
    }
  EXPECT_EQ(seen.size(), 82u);
}

TEST(TextBatcher, NoShuffleTakesConsecutiveWindows) {
  // train 900 bytes, block 10: M = floor(899 / 10) = 89 whole windows, G = 2 * 3 = 6.
  const auto c = corpusOf(1000);
  const int64_t block = 10, G = 6, M = 89;
  const auto b = batcher(c, 3, 2, block, false);
  for (int64_t t : {0, 1, 2, 14, 15, 1000})
    for (int r = 0; r < 2; ++r) {
      const auto off = b.offsets(t, r);
      for (int64_t i = 0; i < 3; ++i) {
        const int64_t j = r * 3 + i;
        EXPECT_EQ(off[i], (t * G + j) % M * block) << "t=" << t << " j=" << j;
      }
    }
  // Before wrapping it is exactly (t*G + j) * block: step 1, rank 1 starts at window 9.
  EXPECT_EQ(b.offsets(1, 1), (std::vector<int64_t>{90, 100, 110}));
  // Step 14 holds windows 84..89: the last window 88 starts at 880 and ends at 890 <= 900,
  // then window 89 wraps to 0.
  EXPECT_EQ(b.globalOffsets(14), (std::vector<int64_t>{840, 850, 860, 870, 880, 0}));
  expectWindows(b.batch(14, 1), c->train(), b.offsets(14, 1), block);
  // Huge steps do not overflow.
  const int64_t t = int64_t{1} << 61;
  EXPECT_EQ(b.offsets(t, 0)[0], static_cast<int64_t>((__int128{t} * G) % M) * block);
}

TEST(TextBatcher, EpochsAndResume) {
  // train 9000 bytes; G = 4 * 2 = 8 windows of 16 bytes = 128 bytes per step.
  const auto c = corpusOf(10000);
  const auto b = batcher(c, 4, 2, 16, true);
  EXPECT_EQ(b.stepsPerEpoch(), 9000 / 128);
  EXPECT_EQ(b.position(0), (Position{0, 0}));
  EXPECT_EQ(b.position(70), (Position{1, 0}));
  EXPECT_EQ(b.position(75), (Position{1, 5}));
  EXPECT_EQ(b.globalStep({3, 9}), 3 * 70 + 9);
  EXPECT_EQ(b.globalStep(b.position(1234)), 1234);
  // An epoch is at least one step, even when one global batch exceeds the split.
  EXPECT_EQ(batcher(corpusOf(100), 16, 2, 8, true).stepsPerEpoch(), 1);
}

TEST(TextBatcher, FillReusesOnlyUnsharedBuffers) {
  const auto c = corpusOf(5000);
  const auto b = batcher(c, 4, 1, 8, true);
  Batch out;
  b.fill(0, 0, out);
  const void* x0 = out.x.rawData();
  b.fill(1, 0, out);
  EXPECT_EQ(out.x.rawData(), x0);  // nothing else held it: reused
  expectWindows(out, c->train(), b.offsets(1, 0), 8);
  const Tensor held = out.x;
  const auto before = ints(held);
  b.fill(2, 0, out);
  EXPECT_NE(out.x.rawData(), held.rawData());  // still referenced: a fresh buffer
  EXPECT_EQ(ints(held), before);
  expectWindows(out, c->train(), b.offsets(2, 0), 8);
}

TEST(TextEval, FixedBatchesOfTheValidationSplit) {
  const auto c = corpusOf(50000);  // validation 5000 bytes
  const TextEvalConfig cfg{.batch = 4, .block = 32, .count = 20, .seed = 42};
  const auto offsets = textEvalOffsets(*c, cfg);
  ASSERT_EQ(offsets.size(), 80u);
  for (int64_t o : offsets) ASSERT_TRUE(o >= 0 && o <= 5000 - 33) << o;
  const auto batches = textEvalBatches(*c, cfg);
  ASSERT_EQ(batches.size(), 20u);
  for (size_t i = 0; i < batches.size(); ++i)
    expectWindows(batches[i], c->validation(),
                  {offsets.begin() + 4 * i, offsets.begin() + 4 * (i + 1)}, 32);
  // The same batches every time; another eval seed gives others.
  EXPECT_EQ(textEvalOffsets(*c, cfg), offsets);
  EXPECT_EQ(ints(textEvalBatches(*c, cfg)[7].y), ints(batches[7].y));
  auto other = cfg;
  other.seed = 43;
  EXPECT_NE(textEvalOffsets(*c, other), offsets);
  // Prefixes agree: fewer batches are the first ones of more.
  auto fewer = cfg;
  fewer.count = 5;
  const auto few = textEvalOffsets(*c, fewer);
  EXPECT_TRUE(std::equal(few.begin(), few.end(), offsets.begin()));
  EXPECT_CONTAINS(
      errorOf<UsageError>([&] { textEvalOffsets(*c, {.batch = 4, .block = 32, .count = 0}); }),
      "evaluation batches");
}

TEST(KjvCorpus, CacheDirectoryRule) {
  EXPECT_EQ(cacheDirFrom("/d", "/x", "/h"), "/d");
  EXPECT_EQ(cacheDirFrom("", "/x", "/h"), "/x/dtrain");
  EXPECT_EQ(cacheDirFrom(nullptr, "/x", "/h"), "/x/dtrain");
  EXPECT_EQ(cacheDirFrom(nullptr, "relative", "/h"), "/h/.cache/dtrain");  // XDG: absolute only
  EXPECT_EQ(cacheDirFrom(nullptr, nullptr, "/h"), "/h/.cache/dtrain");
  EXPECT_CONTAINS(errorOf<UsageError>([] { cacheDirFrom(nullptr, nullptr, nullptr); }),
                  "DTRAIN_CACHE_DIR");
}

TEST(KjvCorpus, MissingBibleProgramSaysToInstallBibleKjv) {
  TempDir dir;
  const auto m = errorOf<UsageError>(
      [&] { loadTextCorpus("", {.cacheDir = dir.str(), .program = "dtrain-no-such-bible"}); });
  EXPECT_CONTAINS(m, "bible-kjv");
  EXPECT_CONTAINS(m, "--text-file");
  EXPECT_FALSE(fs::exists(dir.file(kKjvFileName)));
}

TEST(KjvCorpus, UnusableCacheDirectory) {
  TempDir dir;
  writeBytes(dir.file("file"), {1});
  // A path under a regular file can never be a directory (even for root).
  const auto m = errorOf([&] { materializeKjv({.cacheDir = dir.file("file") + "/sub"}); });
  EXPECT_CONTAINS(m, "cannot create the cache directory");
  EXPECT_CONTAINS(m, "DTRAIN_CACHE_DIR");
  EXPECT_THROW(materializeKjv({.cacheDir = dir.file("file")}), Error);
}

TEST(KjvCorpus, WrongOrFailingProgramOutputIsRejected) {
  TempDir dir;
  const std::string cacheDir = dir.file("cache");
  auto m = errorOf(
      [&] { materializeKjv({.cacheDir = cacheDir, .program = fakeProgram(dir, "printf hello")}); });
  EXPECT_CONTAINS(m, "produced 5 bytes");
  EXPECT_CONTAINS(m, kKjvMd5);
  m = errorOf(
      [&] { materializeKjv({.cacheDir = cacheDir, .program = fakeProgram(dir, "exit 3")}); });
  EXPECT_CONTAINS(m, "exit status 3");
  // A damaged cached copy is not trusted: it is regenerated (here, by the failing fake).
  writeBytes(cacheDir + "/" + kKjvFileName, {'x'});
  EXPECT_CONTAINS(errorOf([&] {
                    materializeKjv({.cacheDir = cacheDir, .program = fakeProgram(dir, "exit 4")});
                  }),
                  "exit status 4");
  // Nothing half-written is left behind.
  for (const auto& e : fs::directory_iterator(cacheDir))
    EXPECT_EQ(e.path().filename().string(), kKjvFileName) << e.path();
}

TEST(KjvCorpus, MaterializedOnceAndReused) {
  if (!onPath("bible")) GTEST_SKIP() << "`bible` not installed (Debian package bible-kjv)";
  TempDir cache;
  const KjvOptions opts{.cacheDir = cache.str()};
  const auto corpus = loadTextCorpus("", opts);
  const std::string path = cache.file(kKjvFileName);
  EXPECT_EQ(corpus->name(), path);
  EXPECT_EQ(corpus->size(), kKjvBytes);
  EXPECT_EQ(md5Hex(corpus->bytes()), kKjvMd5);
  EXPECT_EQ(corpus->trainSize(), 3868415);
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), kKjvBytes);
  const std::string head = "\nGenesis 1\n\n  1 In the beginning God created the heaven";
  EXPECT_TRUE(std::equal(head.begin(), head.end(), corpus->bytes().begin()));

  struct stat before {
  }, after{};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  EXPECT_EQ(materializeKjv(opts), path);  // the second call reuses the file
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // a rewrite would rename a new inode in
  EXPECT_EQ(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
  for (const auto& e : fs::directory_iterator(cache.str()))
    EXPECT_EQ(e.path().filename().string(), kKjvFileName) << e.path();
}
