// Streamed shards through the dtrain command: `dtrain data pack` from an IDX directory,
// `dtrain train --dataset shards` in one process and with --workers, bad shards answered
// with one line naming the file (or counted with --skip-bad-samples), and the flags that
// only streamed datasets read refused elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "data/NpyTestData.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

nlohmann::json lastJsonOf(const CliResult& r) { return nlohmann::json::parse(r.lastLine()); }

// An MNIST-format directory (8x8 bands, 3 classes) packed into 6 train shards and 1 test shard.
struct PackedBands {
  std::string dir = tempDir();
  std::string train = dir + "/sh/train-{000000..000005}.tar", test = dir + "/sh/test-*.tar";
  PackedBands() {
    writeBandsIdx(dir, "train", 1200, 8, 1);
    writeBandsIdx(dir, "t10k", 300, 8, 2);
    auto r = runDtrain("data pack --idx " + dir + " --out " + dir + "/sh/train --shard-size 200");
    EXPECT_EQ(r.code, 0) << r.err;
    auto j = lastJsonOf(r);
    EXPECT_EQ(j["shards"], 6);
    EXPECT_EQ(j["samples"], 1200);
    EXPECT_EQ(j["pattern"], train);
    r = runDtrain("data pack --idx " + dir + " --split test --out " + dir + "/sh/test");
    EXPECT_EQ(r.code, 0) << r.err;
  }
  std::string flags() const {
    return "train --model mlp --progress off --threads 1 --epochs 3 --dataset shards --train-data '" + train +
           "' --test-data '" + test + "' ";
  }
};

}  // namespace

TEST(Shards, PackedIdxTrainsLikeTheInMemoryRun) {
  PackedBands p;
  auto memory = runDtrain("train --model mlp --progress off --threads 1 --epochs 3 --dataset idx --data-dir " + p.dir);
  ASSERT_EQ(memory.code, 0) << memory.err;
  for (const std::string extra : {"", "--workers 2 --loader-threads 2 --shuffle-buffer 100 "}) {
    auto r = runDtrain(p.flags() + extra);
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = lastJsonOf(r);
    EXPECT_EQ(j["dataset"], "shards");
    EXPECT_EQ(j["bad_samples"], 0);
    EXPECT_GE(j["data_wait_s"].get<double>(), 0.0);
    EXPECT_GT(j["test_accuracy"].get<double>(), 0.9) << r.lastLine();
    EXPECT_GT(j["test_accuracy"].get<double>(),
              lastJsonOf(memory)["test_accuracy"].get<double>() - 0.05)
        << extra;
  }
}

TEST(Shards, BadShardIsOneLineNamingTheFileOrCountedWhenSkipped) {
  PackedBands p;
  const std::string junk = p.dir + "/sh/train-junk.tar";
  std::ofstream(junk) << std::string(1024, 'j');
  const std::string withJunk = "train --model mlp --progress off --threads 1 --epochs 1 --dataset shards "
                               "--train-data '" + p.train + "," + junk + "' ";
  auto r = runDtrain(withJunk);
  expectError(r, 2, junk + ": not a tar file or corrupt: bad header checksum");
  r = runDtrain(withJunk + "--skip-bad-samples");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lastJsonOf(r)["bad_samples"], 1);
}

TEST(Shards, FlagsAreCheckedWithOneLine) {
  PackedBands p;
  expectError(runDtrain("train --model mlp --dataset shards"), 2, "--dataset shards needs --train-data");
  expectError(runDtrain("train --model mlp --dataset shards --train-data '" + p.dir + "/none-*.tar'"), 2,
              "no file matches");
  expectError(runDtrain("train --model mlp --loader-threads 2"), 2, "--loader-threads");
  expectError(runDtrain("train --model mlp --epochs 1 --workers 7 --dataset shards --train-data '" +
                        p.train + "'"),
              2, "6 shards for 7 ranks");
  expectError(runDtrain("train --model mlp --dataset shards --no-shuffle --shuffle-buffer 5 --train-data '" +
                        p.train + "'"),
              2, "--shuffle-buffer");
  expectError(runDtrain("data pack --out " + p.dir + "/x"), 2, "give one source");
  expectError(runDtrain("data pack --npy a.npy --labels b.npy --split test --out " + p.dir + "/x"), 2,
              "--split applies to --idx");
  expectError(runDtrain("train --model gpt-tiny --dataset shards --train-data '" + p.train + "'"), 2,
              "--dataset shards trains classification models");
}

TEST(Tokens, PackedTextTrainsAGptOnTokenShards) {
  const std::string dir = tempDir();
  {
    std::ofstream text(dir + "/corpus.txt");
    for (int i = 0; i < 400; ++i) text << "In the beginning was the word, and the word was streamed. ";
  }
  auto r = runDtrain("data pack --text " + dir + "/corpus.txt --out " + dir + "/tok/train --shard-size 8000");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lastJsonOf(r)["shards"], 3);  // 23200 bytes
  r = runDtrain("data pack --text " + dir + "/corpus.txt --out " + dir + "/tok/val");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string run = "train --model gpt-tiny --progress off --threads 1 --max-steps 10 --lr 0.005 --batch-size 8 --block-size 32 "
                          "--dataset tokens --train-data '" + dir + "/tok/train-*.bin' ";
  r = runDtrain(run + "--test-data " + dir + "/tok/val-000000.bin --eval-batches 2");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = lastJsonOf(r);
  EXPECT_EQ(j["dataset"], "tokens");
  EXPECT_EQ(j["shards"], 3);
  EXPECT_TRUE(std::isfinite(j["val_loss"].get<double>()));
  EXPECT_LT(j["val_loss"].get<double>(), 3.5);  // untrained: about ln 256 = 5.55
  std::ofstream(dir + "/tok/train-000001.bin", std::ios::app) << "x";  // now an odd size
  expectError(runDtrain(run), 2, "train-000001.bin: an odd size");
  expectError(runDtrain(run + "--loader-threads 2"), 2, "--loader-threads");
}

// The stream is a pure function of its configuration, so a run stopped mid-epoch and resumed
// (same workers) trains on exactly the batches the uninterrupted run did: the same weights.
TEST(Shards, ResumedMidEpochEqualsTheUninterruptedRun) {
  PackedBands p;
  const std::string run = p.flags() + "--loader-threads 2 --shuffle-buffer 50 ";
  ASSERT_EQ(runDtrain(run + "--max-steps 40 --save " + p.dir + "/full.st").code, 0);
  ASSERT_EQ(runDtrain(run + "--max-steps 27 --checkpoint-every 27 --checkpoint-dir " + p.dir + "/ck").code, 0);
  auto r = runDtrain(run + "--max-steps 40 --checkpoint-dir " + p.dir + "/ck --resume auto --save " +
                     p.dir + "/resumed.st");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(p.dir + "/full.st"), slurp(p.dir + "/resumed.st"));
}
