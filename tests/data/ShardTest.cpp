// Streaming shards: the tar reader, shard patterns, the per-rank split of an epoch, the
// shuffle's determinism, bounded memory and bad data.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "core/Rng.h"
#include "data/ShardList.h"
#include "data/ShardPack.h"
#include "data/ShardStream.h"
#include "DataTestUtil.h"
#include "ShardTestData.h"

namespace dtrain::data {
namespace {

using test::errorOf;
using test::TempDir;
using test::writeShardSet;

std::vector<std::string> keysOf(std::shared_ptr<const ShardSet> set, ShardStreamConfig c,
                                int64_t epoch) {
  ShardStream stream(set, c, epoch);
  std::vector<std::string> keys;
  for (Sample s; stream.next(s);) {
    EXPECT_EQ(s.x.size(), 4u);
    EXPECT_EQ(s.label, static_cast<int32_t>(s.x[0]) % 10);  // features and label of one sample
    keys.push_back(s.key.substr(s.key.rfind(':') + 1));
  }
  return keys;
}

TEST(Tar, WrittenMembersReadBackInOrder) {
  TempDir dir;
  const std::string path = dir.file("a.tar");
  TarWriter w(path);
  const std::string big(1000, 'x');
  w.add("k1.txt", "hello", 5);
  w.add("k1.cls", big.data(), big.size());
  w.add("empty.txt", "", 0);
  w.close();
  TarReader r(path);
  TarEntry e;
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(r.next(e));
  EXPECT_EQ(e.name, "k1.txt");
  r.readData(bytes);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "hello");
  ASSERT_TRUE(r.next(e));  // read past without consuming the data
  EXPECT_EQ(e.size, 1000);
  ASSERT_TRUE(r.next(e));
  EXPECT_EQ(e.name, "empty.txt");
  EXPECT_FALSE(r.next(e));
}

TEST(ShardList, BracesKeepPaddingGlobsSortAndMissingFilesAreNamed) {
  EXPECT_EQ(expandBraces("d/t-{008..011}.tar"),
            (std::vector<std::string>{"d/t-008.tar", "d/t-009.tar", "d/t-010.tar", "d/t-011.tar"}));
  EXPECT_EQ(expandBraces("{a,b}{0..1}"), (std::vector<std::string>{"a0", "a1", "b0", "b1"}));
  TempDir dir;
  for (const char* n : {"x-2.tar", "x-1.tar", "y.tar"}) std::ofstream(dir.file(n)) << "";
  EXPECT_EQ(expandShardPattern(dir.str() + "/x-*.tar", "--train-data"),
            (std::vector<std::string>{dir.file("x-1.tar"), dir.file("x-2.tar")}));
  EXPECT_EQ(expandShardPattern(dir.file("y.tar") + "," + dir.str() + "/x-{1..2}.tar", "--f").size(), 3u);
  EXPECT_CONTAINS(errorOf<UsageError>([&] { expandShardPattern(dir.str() + "/x-{1..3}.tar", "--train-data"); }),
                  "x-3.tar: no such file");
  EXPECT_CONTAINS(errorOf<UsageError>([&] { expandShardPattern(dir.str() + "/z-*.tar", "--test-data"); }),
                  "--test-data " + dir.str() + "/z-*.tar: no file matches");
  EXPECT_CONTAINS(errorOf<UsageError>([] { expandBraces("a-{3..1}"); }), "is empty");
}

// Uneven shards, several world sizes and loader threads: the ranks' samples are disjoint
// and together every sample of the epoch, once.
TEST(ShardStream, RanksTogetherSeeEverySampleOncePerEpoch) {
  TempDir dir;
  const std::vector<int64_t> counts{7, 3, 5, 8, 1, 6, 4, 9, 2, 5, 6, 4};
  auto set = ShardSet::scan(writeShardSet(dir.str(), counts), false);
  ASSERT_EQ(set->samples(), 60);
  for (int world : {1, 2, 3, 5})
    for (int threads : {1, 3})
      for (int64_t epoch : {0, 1}) {
        std::multiset<std::string> all;
        for (int rank = 0; rank < world; ++rank) {
          ShardStreamConfig c{rank, world, threads, 8, 4, 7, true};
          auto keys = keysOf(set, c, epoch);
          EXPECT_GE(static_cast<int64_t>(keys.size()), set->minSamplesPerRank(world));
          all.insert(keys.begin(), keys.end());
        }
        ASSERT_EQ(all.size(), 60u) << "world " << world << " threads " << threads;
        EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), 60u)
            << "a sample seen twice: world " << world << " threads " << threads;
      }
  // Fewest per rank: the floor(S / W) smallest shards.
  EXPECT_EQ(set->minSamplesPerRank(5), 1 + 2);
  EXPECT_EQ(set->minSamplesPerRank(1), 60);
  EXPECT_CONTAINS(errorOf<UsageError>([&] { set->minSamplesPerRank(13); }), "12 shards for 13 ranks");
}

TEST(ShardStream, ShuffleIsDeterministicPerSeedAndEpoch) {
  TempDir dir;
  auto set = ShardSet::scan(writeShardSet(dir.str(), {10, 10, 10, 10}), false);
  const ShardStreamConfig a{0, 2, 2, 6, 3, 11, true};
  ShardStreamConfig b = a;
  b.seed = 12;
  const auto first = keysOf(set, a, 0);
  EXPECT_EQ(first, keysOf(set, a, 0));  // same seed and epoch: the same order, threads or not
  EXPECT_NE(first, keysOf(set, b, 0));
  EXPECT_NE(first, keysOf(set, a, 1));
  ShardStreamConfig plain = a;
  plain.shuffle = false;
  plain.shuffleBuffer = 0;
  plain.threads = 1;
  const auto inOrder = keysOf(set, plain, 0);  // shards 0 and 2, in file order
  ASSERT_EQ(inOrder.size(), 20u);
  EXPECT_EQ(inOrder.front(), "000000");
  EXPECT_EQ(inOrder[10], "000020");
  // Resuming: skipping k samples gives the rest of the same sequence.
  ShardStream resumed(set, a, 0);
  resumed.skip(5);
  Sample s;
  ASSERT_TRUE(resumed.next(s));
  EXPECT_EQ(s.key.substr(s.key.rfind(':') + 1), first[5]);
}

// Packing keeps every value bit for bit: samples of k / 255 values as uint8, others as float32.
TEST(ShardPack, PackedSamplesReadBackBitForBit) {
  TempDir dir;
  Tensor x = Tensor::empty({5, 1, 3}, DType::F32);
  Tensor y = Tensor::empty({5}, DType::I32);
  for (int64_t i = 0; i < 15; ++i)
    x.data<float>()[i] = i < 9 ? static_cast<float>(i * 20) / 255.0f : 0.1f * static_cast<float>(i);
  for (int64_t i = 0; i < 5; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i % 2);
  const TensorDataset ds(x, y, 2);
  const PackResult r = packShards(ds, dir.file("p/train"), 2);
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.pattern, dir.file("p/train") + "-{000000..000002}.tar");
  auto set = ShardSet::scan(expandShardPattern(r.pattern, "--train-data"), false);
  EXPECT_EQ(set->spec().sampleShape, (Shape{1, 3}));
  EXPECT_EQ(set->spec().numClasses, 2);
  ShardStream stream(set, {0, 1, 1, 0, 4, 0, false}, 0);
  int64_t i = 0;
  for (Sample s; stream.next(s); ++i) {
    ASSERT_LT(i, 5);
    EXPECT_EQ(s.label, y.data<int32_t>()[i]);
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(s.x[j], x.data<float>()[i * 3 + j]) << i << " " << j;
  }
  EXPECT_EQ(i, 5);
  // Samples 0-2 are k / 255 values (stored as uint8), 3 and 4 are not (float32).
  auto descrOf = [](const std::string& file) {
    TarReader tar(file);
    TarEntry e;
    std::vector<uint8_t> bytes;
    EXPECT_TRUE(tar.next(e));
    tar.readData(bytes);
    const std::string text(bytes.begin(), bytes.end());
    return text.find("'|u1'") != std::string::npos ? "u1" : text.find("'<f4'") != std::string::npos ? "f4" : "?";
  };
  EXPECT_STREQ(descrOf(r.files[0]), "u1");
  EXPECT_STREQ(descrOf(r.files[2]), "f4");
}

long residentPeakKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
  return -1;
}

// A data set 16x larger than the stream's buffers: the process's peak resident set grows
// by about the buffers, not the data.
TEST(ShardStream, MemoryIsBoundedByTheBuffersNotTheData) {
  TempDir dir;
  constexpr int64_t kFloats = 16 * 1024;  // 64 KiB a sample
  auto set = ShardSet::scan(writeShardSet(dir.str(), std::vector<int64_t>(8, 48), 10, kFloats), false);
  const int64_t dataKiB = set->samples() * kFloats * 4 / 1024;  // 24 MiB
  const long before = residentPeakKiB();
  ShardStream stream(set, {0, 1, 2, 16, 4, 3, true}, 0);  // (16 + 2 x 4) samples: 1.5 MiB
  int64_t seen = 0;
  for (Sample s; stream.next(s);) ++seen;
  EXPECT_EQ(seen, set->samples());
  const long grown = residentPeakKiB() - before;
#if !defined(__SANITIZE_ADDRESS__)  // ASan's quarantine keeps freed buffers resident: RSS measures it, not the stream
  EXPECT_LT(grown, dataKiB / 4) << "peak RSS grew by " << grown << " KiB streaming " << dataKiB
                                << " KiB";
#else
  (void)grown;
  (void)dataKiB;
#endif
}

TEST(ShardSet, BadDataIsOneLineNamingTheFileAndMember) {
  TempDir dir;
  const auto paths = writeShardSet(dir.str(), {3});
  // Truncated inside a member's data.
  auto bytes = test::readBytes(paths[0]);
  test::writeBytes(dir.file("cut.tar"), {bytes.begin(), bytes.begin() + 2660});
  EXPECT_CONTAINS(errorOf<BadData>([&] { ShardSet::scan({dir.file("cut.tar")}, false); }),
                  dir.file("cut.tar") + ": member 000001.npy: truncated");
  test::writeBytes(dir.file("junk.tar"), std::vector<uint8_t>(2048, 'j'));
  EXPECT_CONTAINS(errorOf<BadData>([&] { ShardSet::scan({dir.file("junk.tar")}, false); }),
                  "junk.tar: not a tar file or corrupt: bad header checksum at the start");
  {
    TarWriter w(dir.file("odd.tar"));
    test::addSample(w, dir.file("s.npy"), 0, 10);
    w.add("000001.wav", "RIFF", 4);
    w.add("000002.npy", bytes.data() + 512, 128);  // not its own size: checked by the header
    w.add("000002.cls", "-3", 2);
    w.add("000003.cls", "seven", 5);
    w.close();
  }
  EXPECT_CONTAINS(errorOf<BadData>([&] { ShardSet::scan({dir.file("odd.tar")}, false); }),
                  "odd.tar: member 000001.wav: member type '.wav' is not one dtrain reads");
  auto set = ShardSet::scan({dir.file("odd.tar"), dir.file("cut.tar")}, true);
  EXPECT_EQ(set->samples(), 2);     // odd's sample 0, cut's sample 0
  EXPECT_EQ(set->badSamples(), 4);  // .wav, bad npy, -3 label sample, "seven", cut's rest
  ShardStream stream(set, {0, 1, 1, 0, 4, 0, false}, 0);
  int64_t seen = 0;
  for (Sample s; stream.next(s);) ++seen;
  EXPECT_EQ(seen, 2);  // the stream skips exactly what the scan counted
}

// Garbage and truncation anywhere: an error or fewer samples, never a crash or a hang.
TEST(ShardSet, TruncatedAndCorruptedShardsNeverCrash) {
  TempDir dir;
  const auto good = test::readBytes(writeShardSet(dir.str(), {4})[0]);
  Rng rng(5);
  for (int trial = 0; trial < 120; ++trial) {
    std::vector<uint8_t> bytes = good;
    if (trial % 2 == 0) {
      bytes.resize(rng.below(bytes.size()));
    } else {
      for (int k = 0; k < 8; ++k) bytes[rng.below(bytes.size())] = static_cast<uint8_t>(rng.next());
    }
    test::writeBytes(dir.file("f.tar"), bytes);
    try {
      auto set = ShardSet::scan({dir.file("f.tar")}, trial % 4 < 2);
      ShardStream stream(set, {0, 1, 1, 2, 2, 0, true}, 0);
      for (Sample s; stream.next(s);) EXPECT_EQ(s.x.size(), 4u);
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(dir.file("f.tar")), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dtrain::data
