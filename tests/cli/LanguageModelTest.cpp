// Language models through the dtrain command: gpt-tiny learns a small text,
// and every bad text input gives one line and an exit code.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "TestData.h"
#include "cli/CliRunner.h"

using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {


std::string writeText(const std::string& bytes) {
  const std::string path = tempDir() + "/text.txt";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}


}  // namespace

TEST(LanguageModelCli, GptTinyTrainsAndValLossFallsBelowUniform) {
  const std::string text = writeText(sampleText(20000));
  const fs::path metrics = fs::path(tempDir()) / "m.jsonl";
  auto r = runDtrain("train --model gpt-tiny --max-steps 30 --progress off --eval-batches 4 "
                     "--log-every 10 --text-file " + text + " --metrics " + metrics.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.lastLine());
  for (const char* k : {"val_loss", "val_bpb", "train_loss", "tokens_per_s", "samples_per_s"})
    EXPECT_TRUE(j.contains(k)) << k << " missing in " << r.lastLine();
  EXPECT_FALSE(j.contains("test_accuracy")) << r.lastLine();
  EXPECT_EQ(j["dataset"], "text");
  EXPECT_EQ(j["batch_size"], 16);  // the peer's default for gpt models
  EXPECT_EQ(j["steps"], 30);
  // ln(256) = 5.545 nats per byte is the uniform guess; 30 steps learn the letters.
  EXPECT_LT(j["val_loss"].get<double>(), std::log(256.0) - 1.0) << r.lastLine();
  EXPECT_NEAR(j["val_bpb"].get<double>(), j["val_loss"].get<double>() / std::log(2.0), 1e-9);
  // Logged steps carry the gradient norm before clipping (clip 1.0 is the default).
  std::istringstream lines(slurp(metrics.string()));
  int logged = 0, evaluated = 0;
  for (std::string line; std::getline(lines, line);) {
    auto rec = nlohmann::json::parse(line);
    logged += rec.contains("loss") && rec.contains("grad_norm");
    evaluated += rec.contains("val_loss") && rec.contains("val_bpb");
  }
  EXPECT_EQ(logged, 3);
  EXPECT_EQ(evaluated, 1);
}

TEST(LanguageModelCli, HogwildClipsEachWorkersGradient) {
  // Each Hogwild! update is one clipped SGD step: a max norm far below the
  // gradients' freezes training, the default (1.0) lets it learn. (SGD: Adam's
  // updates do not depend on the gradient's scale.)
  const std::string text = writeText(sampleText(20000));
  const std::string run = "train --model gpt-tiny --strategy hogwild --workers 2 --max-steps 30 "
                          "--optimizer sgd --lr 0.3 --weight-decay 0 --progress off --eval-batches 4 --text-file " +
                          text;
  auto clipped = runDtrain(run + " --clip-grad-norm 1e-7");
  auto normal = runDtrain(run);
  ASSERT_EQ(clipped.code, 0) << clipped.err;
  ASSERT_EQ(normal.code, 0) << normal.err;
  const double frozen = nlohmann::json::parse(clipped.lastLine())["val_loss"].get<double>();
  const double learned = nlohmann::json::parse(normal.lastLine())["val_loss"].get<double>();
  EXPECT_NEAR(frozen, std::log(256.0), 0.1) << clipped.lastLine();  // still the initial guess
  EXPECT_LT(learned, frozen - 0.5) << normal.lastLine();
}

TEST(LanguageModelCli, ArchitectureFlagsOverrideThePreset) {
  const std::string text = writeText(sampleText(4000));
  auto r = runDtrain("train --model gpt-tiny --n-layer 1 --n-embd 32 --n-head 4 --block-size 16 "
                     "--max-steps 2 --batch-size 2 --eval-batches 1 --progress lines --text-file " + text);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(j["block_size"], 16);
  EXPECT_NE(r.err.find("block 16"), std::string::npos) << r.err;
}

TEST(LanguageModelCli, TextErrors) {
  expectError(runDtrain("train --model gpt-tiny --text-file /nonexistent/corpus.txt"), 2,
              "/nonexistent/corpus.txt");
  expectError(runDtrain("train --model gpt-tiny --text-file " + writeText("")), 2, "empty");
  // 200 bytes: the validation split (20 bytes) is shorter than a block of 64 + 1.
  expectError(runDtrain("train --model gpt-tiny --text-file " + writeText(sampleText(200))), 2,
              "block");
}

TEST(LanguageModelCli, FlagErrors) {
  const std::string text = writeText(sampleText(4000));
  const std::string quick = "train --model gpt-tiny --max-steps 1 --text-file " + text + " ";
  expectError(runDtrain(quick + "--dataset fashion-mnist"), 2, "--dataset text");
  expectError(runDtrain("train --dataset text --max-steps 1"), 2, "language model");
  expectError(runDtrain("train --dataset synthetic --text-file " + text), 2, "--text-file");
  expectError(runDtrain(quick + "--n-embd 30 --n-head 4"), 2, "--n-head");
  expectError(runDtrain("train --dataset synthetic --n-layer 3"), 2, "--n-layer");
  expectError(runDtrain(quick + "--adam-betas 0.9"), 2, "--adam-betas");
  expectError(runDtrain(quick + "--optimizer sgd --adam-betas 0.9,0.99"), 2,
              "--adam-betas applies to --optimizer adam, adamw and lamb");
  expectError(runDtrain(quick + "--clip-grad-norm -1"), 2, "--clip-grad-norm");
  expectError(runDtrain(quick + "--clip-grad-norm nan"), 2, "--clip-grad-norm");
}

TEST(LanguageModelCli, BenchPsServesAGpt) {
  // `dtrain bench ps` with any registered model (no timing asserted).
  auto r = runDtrain("bench ps --model gpt-tiny --servers 2 --workers 1 --seconds 0.3");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(j["model"], "gpt-tiny");
  EXPECT_GT(j["parameters"].get<int64_t>(), 100000);
  EXPECT_GT(j["pushes"].get<int64_t>(), 0);
  EXPECT_EQ(j["updates_per_server"].size(), 2u);
}
