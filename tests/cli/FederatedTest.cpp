// `dtrain train --strategy fedavg` as a user runs it (synthetic data: no files needed).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "cli/CliRunner.h"
#include "runtime/Safetensors.h"

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

// The model tensors of a checkpoint (no optimizer state), as bytes.
std::map<std::string, std::string> modelTensors(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : runtime::loadSafetensors(path).tensors)
    if (name.rfind("optimizer.", 0) != 0)
      out[name] = std::string(static_cast<const char*>(t.contiguous().rawData()), t.nbytes());
  return out;
}

const std::string kNormal =
    "train --model mlp --dataset synthetic --synthetic-size 600 --progress off --max-steps 3 ";

// --save writes the global model in the format of every run: a normal run
// loads it, and it holds the same tensors as a normal run's checkpoint.
TEST(Federated, SaveWritesTheGlobalModelAsACheckpoint) {
  const std::string dir = tempDir(), fed = dir + "/fed.safetensors", normal = dir + "/n.safetensors";
  auto r = runDtrain(kSmall + "--save " + fed);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(runDtrain(kNormal + "--save " + normal).code, 0);
  const auto a = modelTensors(fed), b = modelTensors(normal);
  ASSERT_EQ(a.size(), b.size());
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    EXPECT_EQ(ia->first, ib->first);
    EXPECT_EQ(ia->second.size(), ib->second.size()) << ia->first;
  }
  auto loaded = runDtrain(kNormal + "--load " + fed);
  EXPECT_EQ(loaded.code, 0) << loaded.err;
}

// The largest difference between two checkpoints' model tensors (F32).
double maxDifference(const std::map<std::string, std::string>& a,
                     const std::map<std::string, std::string>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, bytes] : a) {
    const std::string& other = b.at(name);
    EXPECT_EQ(bytes.size(), other.size()) << name;
    for (size_t i = 0; i + 4 <= std::min(bytes.size(), other.size()); i += 4) {
      float x, y;
      std::memcpy(&x, bytes.data() + i, 4);
      std::memcpy(&y, other.data() + i, 4);
      worst = std::max(worst, static_cast<double>(std::abs(x - y)));
    }
  }
  return worst;
}

// --load starts the global model from a checkpoint: with a negligible lr the
// clients' deltas vanish and the saved global model is the loaded one.
TEST(Federated, LoadStartsTheGlobalModel) {
  const std::string dir = tempDir(), normal = dir + "/n.safetensors", fed = dir + "/fed.safetensors";
  ASSERT_EQ(runDtrain(kNormal + "--save " + normal).code, 0);
  const std::string frozen = kSmall + "--lr 1e-12 --rounds 1 --save " + fed;
  auto r = runDtrain(frozen + " --load " + normal);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto loaded = modelTensors(normal);
  EXPECT_LT(maxDifference(modelTensors(fed), loaded), 1e-6);
  ASSERT_EQ(runDtrain(frozen).code, 0);  // without --load: the seed's fresh model
  EXPECT_GT(maxDifference(modelTensors(fed), loaded), 1e-3);
  expectError(runDtrain(kSmall + "--load " + dir + "/none.safetensors"), 2,
              "--load " + dir + "/none.safetensors: no such checkpoint file");
  expectError(runDtrain(kSmall + "--model lenet --load " + normal), 2,
              "holds a mlp checkpoint, not lenet");
}

// --timeline: every round's span with the aggregation inside it, and the
// clients' training on the worker threads' lanes.
TEST(Federated, TimelineHasRoundsAggregationAndClients) {
  const std::string path = tempDir() + "/t.json";
  auto r = runDtrain(kSmall + "--workers 2 --timeline " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(slurp(path));
  int rounds = 0, aggregates = 0, clients = 0;
  std::set<int> clientLanes;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const std::string name = e.at("name");
    rounds += name == "round";
    aggregates += name == "aggregate";
    if (name.rfind("client ", 0) == 0) {
      ++clients;
      clientLanes.insert(e.at("tid").get<int>());
    }
  }
  EXPECT_EQ(rounds, 3);
  EXPECT_EQ(aggregates, 3);
  EXPECT_EQ(clients, 3 * 5);  // 5 clients a round, none dropped
  // The workers take clients from a shared counter: on a busy machine one of
  // them may take every client, so the lanes are at most the workers, not exactly.
  EXPECT_GE(clientLanes.size(), 1u);
  EXPECT_LE(clientLanes.size(), 2u);
}

// The result line has the fields every strategy's has.
TEST(Federated, ResultLineHasParametersAndMemoryPerRank) {
  auto r = runDtrain(kSmall);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(j.at("parameters"), 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
  ASSERT_EQ(j.at("memory_per_rank").size(), 1u);
  EXPECT_GT(j.at("memory_per_rank")[0].at("parameters").get<int64_t>(), 0);
}

}  // namespace
}  // namespace dtrain::test
