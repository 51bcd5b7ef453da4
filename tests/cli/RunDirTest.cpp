// dtrain train --run-dir D: the files a dashboard reads, and the flags it refuses beside it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/CliRunner.h"

using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {
const char* kSmallRun =
    "train --dataset synthetic --synthetic-size 512 --epochs 1 --log-every 2 --progress off ";
}  // namespace

TEST(RunDir, HoldsConfigMetricsResultTimelineAndMachine) {
  const fs::path dir = fs::path(tempDir()) / "runs" / "a";  // created, parents too
  // A machine file is copied as it is: the run only reads it through --machine.
  const std::string machine = std::string(DTRAIN_SCRIPTS) + "/../plan/clusters/example-cpu.json";
  const auto r = runDtrain(std::string(kSmallRun) + "--workers 2 --run-dir " + dir.string() +
                           " --run-timeline --machine " + machine);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp((dir / "result.json").string())),
            nlohmann::json::parse(r.lastLine()));
  // config.toml reruns the same configuration (its own metrics path is not in it).
  const std::string config = slurp((dir / "config.toml").string());
  EXPECT_NE(config.find("workers = 2"), std::string::npos) << config;
  EXPECT_EQ(config.find("metrics"), std::string::npos) << config;
  std::istringstream lines(slurp((dir / "metrics.jsonl").string()));
  int steps = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto rec = nlohmann::json::parse(line);
    if (rec.contains("loss")) {
      ++steps;
      EXPECT_TRUE(rec.contains("time_s")) << line;  // loss against time
    }
  }
  EXPECT_EQ(steps, 2);  // 4 steps of 2 x 64 samples, logged every 2
  EXPECT_TRUE(nlohmann::json::parse(slurp((dir / "timeline.json").string())).contains("traceEvents"));
  EXPECT_EQ(slurp((dir / "machine.json").string()), slurp(machine));
}

TEST(RunDir, RefusesAnotherMetricsOrTimelinePathBesideIt) {
  const std::string dir = tempDir() + "/run";
  expectError(runDtrain(std::string(kSmallRun) + "--run-dir " + dir + " --metrics m.jsonl"), 2,
              "--metrics m.jsonl conflicts with --run-dir " + dir);
  expectError(runDtrain(std::string(kSmallRun) + "--run-dir " + dir + " --timeline t.json"), 2,
              "--timeline t.json conflicts with --run-dir " + dir);
  expectError(runDtrain(std::string(kSmallRun) + "--run-timeline"), 2,
              "--run-timeline writes into --run-dir DIR");
  const std::string file = tempDir() + "/f";
  { std::ofstream(file) << "x"; }
  expectError(runDtrain(std::string(kSmallRun) + "--run-dir " + file), 2, "is a file, not a directory");
}
