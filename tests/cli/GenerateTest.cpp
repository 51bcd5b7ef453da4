// dtrain generate: deterministic sampling from a gpt checkpoint, and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/CliRunner.h"

using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {


// A small gpt checkpoint (block 16) trained for a few steps, made once.
const std::string& gptCheckpoint() {
  static const std::string path = [] {
    const std::string dir = tempDir();
    std::ofstream text(dir + "/text.txt");
    for (int i = 0; i < 200; ++i) text << "And God said, Let there be light: and there was light.\n";
    text.close();
    const std::string ckpt = dir + "/gpt.safetensors";
    auto r = runDtrain("train --model gpt-tiny --n-layer 1 --n-embd 32 --block-size 16 --batch-size 4 "
                       "--max-steps 5 --eval-batches 1 --progress off --text-file " + dir +
                       "/text.txt --save " + ckpt);
    EXPECT_EQ(r.code, 0) << r.err;
    return ckpt;
  }();
  return path;
}

}  // namespace

TEST(Generate, SameSeedSameTextAndTokensPerSecondOnStderr) {
  const std::string cmd = "generate --load " + gptCheckpoint() +
                          " --prompt 'And God' --max-new-tokens 40 --temperature 0.8 --top-k 40 ";
  auto a = runDtrain(cmd + "--seed 1");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out.rfind("And God", 0), 0u) << a.out;
  EXPECT_EQ(a.out.size(), 7u + 40u + 1u);  // prompt, 40 bytes, newline
  EXPECT_NE(a.err.find("tokens/s"), std::string::npos) << a.err;
  EXPECT_EQ(runDtrain(cmd + "--seed 1").out, a.out);
  // Past the block of 16 the context is cropped, not refused.
  EXPECT_EQ(runDtrain(cmd + "--seed 2 --max-new-tokens 30").code, 0);
}

TEST(Generate, TheKvCacheChangesNothingButTheSpeed) {
  // Greedy, so that the comparison does not hinge on a random draw; 30 new bytes
  // after a 7-byte prompt cross the block of 16 (the cache then steps aside).
  const std::string cmd = "generate --load " + gptCheckpoint() +
                          " --prompt 'And God' --max-new-tokens 30 --temperature 0 ";
  auto cached = runDtrain(cmd), plain = runDtrain(cmd + "--no-kv-cache");
  ASSERT_EQ(cached.code, 0) << cached.err;
  EXPECT_EQ(cached.out, plain.out);
}

TEST(Generate, Errors) {
  expectError(runDtrain("generate --load /nonexistent.safetensors --prompt x"), 2,
              "/nonexistent.safetensors");
  expectError(runDtrain("generate --load " + gptCheckpoint() + " --prompt ''"), 2, "empty");
  expectError(runDtrain("generate --load " + gptCheckpoint() + " --prompt 'seventeen bytes!!'"), 2,
              "block of 16");
  const std::string mlp = tempDir() + "/mlp.safetensors";
  ASSERT_EQ(runDtrain("train --dataset synthetic --synthetic-size 256 --max-steps 1 --progress off "
                      "--save " + mlp).code, 0);
  expectError(runDtrain("generate --load " + mlp + " --prompt x"), 2, "not a language model");
}
