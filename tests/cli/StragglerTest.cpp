// The slow rank named (runtime/StragglerWatch.h): --straggler slows one worker on
// purpose; the result line and one stderr line name it, and without it none is.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"

using namespace dtrain::test;

namespace {
// 16 steps of 2 x 64 samples, the ranks compared every 4.
const char* kTwoWorkers =
    "train --dataset synthetic --synthetic-size 2048 --epochs 1 --workers 2 --log-every 4 "
    "--progress off ";

std::string host() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}
}  // namespace

TEST(Straggler, TheSlowedWorkerIsNamedWithItsHost) {
  // 40 ms a step: many times this model's step, so the rank is late beyond doubt.
  const auto r = runDtrain(std::string(kTwoWorkers) + "--straggler 1:40");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto s = nlohmann::json::parse(r.lastLine())["straggler"];
  ASSERT_TRUE(s.is_object()) << r.lastLine();
  EXPECT_EQ(s["rank"], 1);
  EXPECT_EQ(s["host"], host());
  EXPECT_GT(s["excess_s"].get<double>(), 0.02);  // most of the 40 ms
  EXPECT_GT(s["share_of_step"].get<double>(), 0.2);
  const std::string line = "rank 1 (" + host() + ") is the slow rank";
  const size_t at = r.err.find(line);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << "reported once: " << r.err;
}

TEST(Straggler, NoneIsNamedWithoutOne) {
  const auto r = runDtrain(kTwoWorkers);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.lastLine());
  ASSERT_TRUE(j.contains("straggler")) << r.lastLine();
  EXPECT_TRUE(j["straggler"].is_null()) << r.lastLine();
  EXPECT_EQ(r.err.find("is the slow rank"), std::string::npos) << r.err;
}
