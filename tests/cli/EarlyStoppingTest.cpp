// --val-fraction (a validation split held out of the training set) and
// --early-stop-patience (stop when the evaluated metric stops improving).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "TestData.h"

using namespace dtrain;
using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {
const std::string kSmallRun =
    "train --dataset synthetic --synthetic-size 640 --threads 1 --progress off ";
}  // namespace

TEST(EarlyStopping, ValFractionIsEvaluatedBesideTheTestSet) {
  fs::path metrics = fs::path(tempDir()) / "val.jsonl";
  auto r = runDtrain(kSmallRun + "--val-fraction 0.5 --epochs 1 --eval-every 2 --metrics " +
                     metrics.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.lastLine());
  for (const char* k : {"val_loss", "val_accuracy", "test_loss", "test_accuracy"})
    EXPECT_TRUE(j.contains(k)) << k << " missing in " << r.lastLine();
  EXPECT_EQ(j["steps"], 5);  // 320 of the 640 samples train: 5 steps of 64
  EXPECT_NE(r.err.find("; val accuracy "), std::string::npos) << r.err;  // the summary line
  int evaluations = 0;
  std::istringstream lines(slurp(metrics.string()));
  for (std::string line; std::getline(lines, line);)
    evaluations += nlohmann::json::parse(line).contains("val_loss");
  EXPECT_EQ(evaluations, 3);  // steps 2 and 4, and the end
}

// A learning rate too small to move any prediction: val_accuracy never improves on
// its first evaluation, so training stops after exactly `patience` more.
TEST(EarlyStopping, StopsAfterPatienceEvaluationsAndResumesStopped) {
  const fs::path dir = fs::path(tempDir()) / "early-ckpt";
  fs::remove_all(dir);
  const std::string args = kSmallRun +
                           "--val-fraction 0.25 --lr 1e-12 --max-steps 100 --eval-every 3 "
                           "--early-stop-patience 2 --early-stop-metric val_accuracy "
                           "--checkpoint-dir " + dir.string() + " --resume auto";
  auto first = runDtrain(args);
  ASSERT_EQ(first.code, 0) << first.err;
  auto j = nlohmann::json::parse(first.lastLine());
  EXPECT_EQ(j["stopped_early"], true) << first.lastLine();
  EXPECT_EQ(j["best_step"], 3);
  EXPECT_EQ(j["steps"], 9);  // evaluations at 3 (the best), 6 and 9
  EXPECT_TRUE(j.contains("best_val_accuracy"));
  EXPECT_NE(first.err.find("[dtrain info] stopped early at step 9: val_accuracy has not improved"),
            std::string::npos) << first.err;
  EXPECT_TRUE(fs::exists(dir / "step-000000009.safetensors"));
  // Run again: the checkpoint says it stopped, so nothing more trains.
  auto again = runDtrain(args);
  ASSERT_EQ(again.code, 0) << again.err;
  auto k = nlohmann::json::parse(again.lastLine());
  EXPECT_EQ(k["steps"], 9) << again.lastLine();
  EXPECT_EQ(k["stopped_early"], true);
  EXPECT_EQ(k["best_step"], 3);
}

TEST(EarlyStopping, WhatCannotBeSplitOrWatchedIsOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"--dataset synthetic --eval-every 5 --early-stop-patience 2",
       "--early-stop-patience watches val_loss (the default --early-stop-metric), which needs a "
       "validation split: add --val-fraction F"},
      {"--dataset synthetic --early-stop-patience 2", "--early-stop-patience needs --eval-every N"},
      {"--dataset synthetic --val-fraction 0.1 --eval-every 5 --early-stop-patience 2 --strategy hogwild --workers 2",
       "--strategy hogwild's ranks run at their own pace"},
      {"--dataset shards --train-data x.tar --val-fraction 0.1",
       "--val-fraction does not apply to --dataset shards: streamed samples cannot be split; give "
       "validation shards as --test-data"},
      {"--model gpt-tiny --val-fraction 0.1", "they hold out validation windows of their own"},
      {"--dataset synthetic --synthetic-size 4 --val-fraction 0.1", "--val-fraction 0.1 of 4 training samples holds out 0"},
  };
  for (const auto& [flags, message] : cases) {
    auto r = runDtrain("train --progress off --threads 1 " + flags);
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << flags << "\n" << r.err;
  }
}
