// Asynchronous parameter servers train a real model to real accuracy: the mlp
// on Fashion-MNIST with 4 Downpour workers reaches 85% test accuracy.
#include <gtest/gtest.h>

#include <filesystem>

#include "parallel/PsTestUtil.h"

namespace dtrain::test {
namespace {

TEST(PsConvergence, AsyncMlpReaches85PercentOnFashionMnist) {
  runtime::TrainConfig c;
  if (!std::filesystem::exists(c.dataDir)) GTEST_SKIP() << "Fashion-MNIST not at " << c.dataDir;
  c.model = "mlp";
  c.workers = 4;
  c.strategy = "ps";
  c.batchSize = 64;
  c.epochs = 4;
  // Each push is applied with lr/W (see PsWorker::applyUpdate); momentum 0.5
  // rather than 0.9 because staleness itself acts as momentum (Mitliagkas et
  // al., "Asynchrony begets momentum"); the cosine schedule settles the end.
  c.lr = 0.2;
  c.momentum = 0.5;
  c.schedule = "cosine";
  c.seed = 1;
  c.progress = runtime::TrainConfig::Progress::Off;
  c.logEvery = 1000;
  auto o = psOptions(c, 2, parallel::ps::Consistency::Async);
  auto run = runPs(c, o);
  EXPECT_GE(run.result.testAccuracy, 0.85);
  // Really asynchronous: gradients were applied to parameters that had moved on.
  double stale = 0, total = 0;
  for (size_t k = 0; k < run.servers[0].staleness.size(); ++k) {
    stale += k > 0 ? run.servers[0].staleness[k] : 0;
    total += run.servers[0].staleness[k];
  }
  EXPECT_GT(stale / total, 0.5);
}

}  // namespace
}  // namespace dtrain::test
