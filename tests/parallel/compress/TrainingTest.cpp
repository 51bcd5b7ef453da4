// Compression inside the allreduce strategy, through the Trainer: replicas stay
// identical with every compressor (with overlap, without, with --accumulate),
// and the mlp trained with onebit and with powersgd rank 2 reaches 80% test
// accuracy on Fashion-MNIST in 1 epoch on 2 workers (85% within 3 epochs with
// DTRAIN_LONG_TESTS=1).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/local/Local.h"
#include "parallel/allreduce/DataParallel.h"
#include "runtime/Trainer.h"

namespace dtrain::test {
namespace {

using Params = std::map<std::string, std::vector<float>>;

struct Run {
  std::vector<Params> params;  // per rank
  runtime::TrainResult result;  // rank 0's
};

Run train(const runtime::TrainConfig& c, int workers, bool overlap = true) {
  auto trainSet = runtime::loadDataset(c, true);
  auto testSet = runtime::loadDataset(c, false);
  Run run;
  run.params.resize(workers);
  comm::local::runLocal(workers, [&](comm::Communicator& comm) {
    parallel::DataParallelOptions o;
    o.overlap = overlap;
    o.fusionMb = 0.05;  // several buckets for the mlp
    o.compress = runtime::compressOptions(c);
    runtime::Trainer t(c, std::make_unique<parallel::DataParallel>(comm, o));
    t.setData(trainSet, testSet);
    auto r = t.run();
    if (comm.rank() == 0) run.result = r;
    for (auto& [name, v] : t.model().namedParameters())
      run.params[comm.rank()][name] = v.data().contiguous().toVector();
  });
  return run;
}

runtime::TrainConfig smallRun(const std::string& compress) {
  runtime::TrainConfig c;
  c.model = "mlp";
  c.dataset = "synthetic";
  c.syntheticSize = 512;
  c.maxSteps = 12;
  c.epochs = 100;
  c.batchSize = 16;
  c.seed = 5;
  c.workers = 2;
  c.strategy = "allreduce";
  c.compress = compress;
  c.compressRank = 2;
  c.compressStartStep = 3;
  c.compressRatio = 0.05;
  c.progress = runtime::TrainConfig::Progress::Off;
  c.prefetch = 1;
  c.logEvery = 100;
  return c;
}

TEST(CompressTraining, ReplicasStayIdenticalWithEveryCompressor) {
  for (const auto& name : parallel::compress::compressorNames()) {
    // Overlap with accumulation, and buckets launched after backward without.
    for (auto [accumulate, overlap] : {std::pair{2, true}, std::pair{1, false}}) {
      auto c = smallRun(name);
      c.accumulate = accumulate;
      auto run = train(c, 2, overlap);
      EXPECT_EQ(run.params[0], run.params[1])
          << name << " accumulate " << accumulate << " overlap " << overlap;
      EXPECT_TRUE(std::isfinite(run.result.trainLoss)) << name;
      EXPECT_GT(run.result.strategyStats.at("compressed_bytes_per_step"), 0) << name;
    }
  }
}

TEST(CompressTraining, NoneIsTodaysPathBitwise) {
  // The default options (no --compress at all) and --compress none: same bits.
  auto c = smallRun("none");
  auto withNone = train(c, 2);
  auto trainSet = runtime::loadDataset(c, true);
  auto testSet = runtime::loadDataset(c, false);
  std::vector<Params> plain(2);
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    parallel::DataParallelOptions o;
    o.fusionMb = 0.05;
    runtime::Trainer t(c, std::make_unique<parallel::DataParallel>(comm, o));
    t.setData(trainSet, testSet);
    t.run();
    for (auto& [name, v] : t.model().namedParameters())
      plain[comm.rank()][name] = v.data().contiguous().toVector();
  });
  EXPECT_EQ(withNone.params[0], plain[0]);
}

// The best test accuracy over the evaluations of a run (every half epoch and
// at the end): "reaches 85% within 3 epochs", as a time-to-accuracy target.
double bestAccuracy(const std::string& metricsFile) {
  double best = 0;
  std::ifstream in(metricsFile);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("test_accuracy")) best = std::max(best, j["test_accuracy"].get<double>());
  }
  return best;
}

// The mlp on 2 workers for `epochs` epochs (cosine schedule: the end of a
// constant-lr run is noisy, compressed or not); the best evaluation must reach
// `target`, the final one `target` - 1 point.
void expectReaches(const std::string& compress, int64_t epochs, double target,
                   const std::string& collective = "allgather") {
  runtime::TrainConfig c;
  if (!std::filesystem::exists(c.dataDir)) GTEST_SKIP() << "Fashion-MNIST not at " << c.dataDir;
  c.model = "mlp";
  c.workers = 2;
  c.strategy = "allreduce";
  c.epochs = epochs;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.schedule = "cosine";
  c.seed = 1;
  c.compress = compress;
  c.compressRank = 2;
  c.compressCollective = collective;
  c.evalEvery = 234;  // half an epoch of batch 2 x 64
  c.progress = runtime::TrainConfig::Progress::Off;
  c.logEvery = 1000;
  c.metrics = std::filesystem::temp_directory_path() /
              ("dtrain-compress-" + compress + "-" + std::to_string(::getpid()) + ".jsonl");
  auto run = train(c, 2);
  const double best = bestAccuracy(c.metrics);
  std::filesystem::remove(c.metrics);
  EXPECT_GE(best, target) << compress << ": final " << run.result.testAccuracy;
  EXPECT_GE(run.result.testAccuracy, target - 0.01) << compress;
}

// In the suite: one epoch (~10-30 s each), where uncompressed reaches ~84%.
TEST(CompressConvergence, OneBitMlpReaches80PercentIn1Epoch) { expectReaches("onebit", 1, 0.80); }
// Two-stage re-quantizes the averaged partitions (a second error feedback), which
// costs about a point after one epoch: seeds 1-4 reached 0.788-0.813 with
// AVX-512 kernels (0.816-0.822 with allgather), so the target is 77.5%.
TEST(CompressConvergence, OneBitTwoStageMlpReaches77PercentIn1Epoch) {
  expectReaches("onebit", 1, 0.775, "two-stage");
}
TEST(CompressConvergence, PowerSgdRank2MlpReaches80PercentIn1Epoch) {
  expectReaches("powersgd", 1, 0.80);
}

// The target, 85% within 3 epochs: 30-100 s each on the shared 2-core
// machine, so only on request (docs/PERFORMANCE.md, "Gradient compression"):
//   DTRAIN_LONG_TESTS=1 build/tests/parallel/compress/compress_tests --gtest_filter='CompressConvergence.*'
bool longTests() { return std::getenv("DTRAIN_LONG_TESTS") != nullptr; }
TEST(CompressConvergence, OneBitMlpReaches85PercentIn3Epochs) {
  if (!longTests()) GTEST_SKIP() << "3 epochs: set DTRAIN_LONG_TESTS=1";
  expectReaches("onebit", 3, 0.85);
}
TEST(CompressConvergence, PowerSgdRank2MlpReaches85PercentIn3Epochs) {
  if (!longTests()) GTEST_SKIP() << "3 epochs: set DTRAIN_LONG_TESTS=1";
  expectReaches("powersgd", 3, 0.85);
}

}  // namespace
}  // namespace dtrain::test
