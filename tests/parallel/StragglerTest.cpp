// --straggler and --random-delay slow exactly the workers they name: the
// timeline shows a "straggler delay" span on every step of those workers, and
// on no other.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

#include "cli/CliRunner.h"

namespace dtrain::test {
namespace {

// Per rank (pid): the number of "straggler delay" spans.
std::map<int, int> delaySpans(const std::string& flags) {
  const std::string dir = tempDir();
  auto r = runDtrain("train --dataset synthetic --synthetic-size 512 --epochs 10 --max-steps 6 --progress off "
                     "--timeline " + dir + "/t.json " + flags);
  EXPECT_EQ(r.code, 0) << r.err;
  std::map<int, int> out;
  const auto doc = nlohmann::json::parse(slurp(dir + "/t.json"));  // outlives the loop
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("name") == "straggler delay") ++out[e.at("pid").get<int>()];
  std::filesystem::remove_all(dir);
  return out;
}

TEST(Stragglers, FixedDelayOnlyOnTheNamedWorker) {
  EXPECT_EQ(delaySpans("--workers 3 --straggler 2:1"), (std::map<int, int>{{2, 6}}));
  EXPECT_EQ(delaySpans("--workers 3 --strategy ps --straggler 1:1"), (std::map<int, int>{{1, 6}}));
}

TEST(Stragglers, RandomDelayOnEveryWorker) {
  EXPECT_EQ(delaySpans("--workers 2 --random-delay 0.5"), (std::map<int, int>{{0, 6}, {1, 6}}));
  EXPECT_TRUE(delaySpans("--workers 2").empty());
}

}  // namespace
}  // namespace dtrain::test
