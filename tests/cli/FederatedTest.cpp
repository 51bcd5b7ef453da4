// `dtrain train --strategy fedavg` as a user runs it (synthetic data: no files needed).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"

namespace dtrain::test {
namespace {

const std::string kSmall =
    "train --strategy fedavg --model mlp --dataset synthetic --synthetic-size 600 "
    "--progress off --lr 0.1 --clients 10 --client-fraction 0.5 --rounds 3 ";

TEST(Federated, FinalLineAndPerRoundMetrics) {
  const std::string metrics = tempDir() + "/fed.jsonl";
  auto r = runDtrain(kSmall + "--workers 2 --dp-clip 1 --dp-noise 0.5 --metrics " + metrics);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(j["strategy"], "fedavg");
  EXPECT_EQ(j["rounds"], 3);
  EXPECT_GT(j["dp_epsilon"].get<double>(), 0.0);
  EXPECT_GT(j["bytes_up"].get<int64_t>(), 0);
  EXPECT_TRUE(j.contains("test_accuracy"));
  std::istringstream lines(slurp(metrics));
  int rounds = 0;
  double lastEps = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto rec = nlohmann::json::parse(line);
    if (!rec.contains("round")) continue;
    ++rounds;
    EXPECT_TRUE(rec.contains("test_accuracy") && rec.contains("clients_reported") &&
                rec.contains("bytes_down"));
    EXPECT_GT(rec["dp_epsilon"].get<double>(), lastEps);
    lastEps = rec["dp_epsilon"].get<double>();
  }
  EXPECT_EQ(rounds, 3);
}

TEST(Federated, BadFlagsAreOneLineErrors) {
  expectError(runDtrain("train --clients 10 --dataset synthetic"), 2,
              "--clients does not apply to --strategy single (only to --strategy fedavg)");
  expectError(runDtrain(kSmall + "--partition zipf"), 2, "unknown --partition 'zipf'");
  expectError(runDtrain(kSmall + "--aggregator average"), 2, "unknown --aggregator 'average'");
  expectError(runDtrain(kSmall + "--attackers 0.2"), 2, "--attackers needs --attack");
  expectError(runDtrain(kSmall + "--batch-size 32"), 2, "(use --local-batch)");
  expectError(runDtrain("train --strategy fedavg --model gpt-tiny --progress off --rounds 1"), 2,
              "trains classifiers");
}

}  // namespace
}  // namespace dtrain::test
