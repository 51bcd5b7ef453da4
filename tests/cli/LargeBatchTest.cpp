// Large-batch training through the dtrain binary: --optimizer lamb under the
// strategies that run the optimizer on whole layers (allreduce equals one
// worker with the global batch; a resumed run is bitwise the uninterrupted
// one) and one line where it cannot work.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "runtime/Safetensors.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

const std::string kLargeBatchRun =
    "train --model mlp --dataset synthetic --synthetic-size 512 --progress off --seed 3 "
    "--optimizer lamb --lr 0.01 --weight-decay 0.01 ";

void largeBatchOk(const std::string& args) {
  auto r = runDtrain(args);
  ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
}

// Every tensor of two checkpoints (model and optimizer state) within `tol`, or
// bitwise equal with tol 0.
void expectSameCheckpoint(const std::string& a, const std::string& b, double tol) {
  auto ta = runtime::loadSafetensors(a), tb = runtime::loadSafetensors(b);
  ASSERT_EQ(ta.tensors.size(), tb.tensors.size());
  bool sawLambState = false;
  for (size_t i = 0; i < ta.tensors.size(); ++i) {
    const auto& [name, x] = ta.tensors[i];
    const auto& y = tb.tensors[i].second;
    ASSERT_EQ(name, tb.tensors[i].first);
    ASSERT_EQ(x.nbytes(), y.nbytes()) << name;
    sawLambState |= name.find("exp_avg_sq") != std::string::npos;
    if (tol == 0) {
      EXPECT_EQ(std::memcmp(x.rawData(), y.rawData(), x.nbytes()), 0) << name;
    } else if (x.dtype() == DType::F32) {
      const auto vx = x.toVector(), vy = y.toVector();
      double worst = 0;
      for (size_t j = 0; j < vx.size(); ++j) worst = std::max(worst, double(std::fabs(vx[j] - vy[j])));
      EXPECT_LE(worst, tol) << name;
    }
  }
  EXPECT_TRUE(sawLambState) << "no LAMB state in " << a;
}

TEST(Lamb, TwoWorkersEqualOneWorkerWithTheGlobalBatch) {
  const std::string dir = tempDir();
  largeBatchOk(kLargeBatchRun + "--workers 2 --batch-size 16 --max-steps 12 --save " + dir + "/two.st");
  largeBatchOk(kLargeBatchRun + "--batch-size 32 --max-steps 12 --save " + dir + "/one.st");
  expectSameCheckpoint(dir + "/two.st", dir + "/one.st", 1e-5);
  // Gradient accumulation: 2 micro-batches of 8 per worker, the same global batch.
  largeBatchOk(kLargeBatchRun + "--workers 2 --batch-size 8 --accumulate 2 --max-steps 12 --save " +
               dir + "/acc.st");
  expectSameCheckpoint(dir + "/acc.st", dir + "/one.st", 1e-5);
  std::filesystem::remove_all(dir);
}

TEST(Lamb, ResumeIsBitwiseIdenticalToAnUninterruptedRun) {
  const std::string dir = tempDir();
  // 16 steps per epoch: the resume at 10 goes on across the epoch boundary.
  const std::string common = kLargeBatchRun + "--batch-size 32 --epochs 3 ";
  largeBatchOk(common + "--max-steps 20 --save " + dir + "/full.st");
  largeBatchOk(common + "--max-steps 10 --save " + dir + "/half.st");
  largeBatchOk(common + "--max-steps 20 --load " + dir + "/half.st --save " + dir + "/resumed.st");
  expectSameCheckpoint(dir + "/full.st", dir + "/resumed.st", 0);
  std::filesystem::remove_all(dir);
}

TEST(Lamb, OneLineWhereLayerNormsAreNotWhole) {
  auto refused = [](const std::string& extra, const std::string& needle) {
    auto r = runDtrain(kLargeBatchRun + "--max-steps 2 " + extra);
    EXPECT_EQ(r.code, 2) << extra << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << extra << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  refused("--strategy ps --workers 2", "--optimizer lamb needs whole-layer norms");
  // ZeRO and tensor parallelism sum the pieces' norms (tests/parallel/ZeroTest.cpp,
  // TensorParallelTest.cpp); both together do not yet.
  refused("--workers 4 --tensor-parallel 2 --zero 1", "--tensor-parallel with --zero does not support --optimizer lamb");
  refused("--momentum 0.9", "--momentum");
  // Adam's betas are LAMB's too.
  auto r = runDtrain(kLargeBatchRun + "--max-steps 2 --adam-betas 0.9,0.99");
  EXPECT_EQ(r.code, 0) << r.err;
}

// --scale-lr and --warmup-steps under each strategy: the rate the metrics log
// at every step and the result line's effective_lr, against the linear scaling
// rule by hand: --lr x (global batch / --batch-size), reached linearly over
// the warm-up (lr * (step + 1) / warmup at 0-based step).
struct ScaledRun {
  std::string strategyArgs;
  double scale;  // global batch / --batch-size
};

TEST(LinearScaling, EffectiveLrUsesTheGlobalBatchUnderEveryStrategy) {
  const std::vector<ScaledRun> runs = {
      {"--workers 2 --batch-size 8 --accumulate 2", 4},           // allreduce, accumulation
      {"--batch-size 8 --accumulate 3", 3},                       // one process, accumulation
      {"--strategy ps --workers 2 --batch-size 8", 2},            // sync parameter servers
      {"--strategy ps --servers 2 --workers 3 --batch-size 8", 3},
      {"--workers 4 --pipeline-stages 2 --batch-size 8", 2},      // 2 replicas of 2 stages
      {"--workers 2 --batch-size 16", 2}};
  const double lr = 0.01;
  const int warmup = 4;
  for (const auto& run : runs) {
    SCOPED_TRACE(run.strategyArgs);
    const std::string dir = tempDir();
    auto r = runDtrain("train --model mlp --dataset synthetic --synthetic-size 1024 --max-steps 6 "
                       "--progress off --lr 0.01 --scale-lr --warmup-steps 4 --log-every 1 "
                       "--metrics " + dir + "/m.jsonl " + run.strategyArgs);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto result = nlohmann::json::parse(r.lastLine());
    EXPECT_NEAR(result.at("effective_lr").get<double>(), lr * run.scale, 1e-12);
    std::ifstream metrics(dir + "/m.jsonl");
    std::vector<double> logged;
    for (std::string line; std::getline(metrics, line);) {
      const auto rec = nlohmann::json::parse(line);
      if (rec.contains("loss")) logged.push_back(rec.at("lr").get<double>());
    }
    ASSERT_EQ(logged.size(), 6u);
    for (int step = 0; step < 6; ++step)
      EXPECT_NEAR(logged[step], lr * run.scale * std::min(1.0, (step + 1.0) / warmup), 1e-12) << step;
    std::filesystem::remove_all(dir);
  }
  // Without --scale-lr the rate is --lr whatever the batch.
  auto plain = runDtrain("train --model mlp --dataset synthetic --synthetic-size 1024 --max-steps 2 "
                         "--progress off --lr 0.01 --workers 2 --accumulate 2");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.lastLine()).at("effective_lr").get<double>(), lr);
  // Hogwild! workers each take their own steps of --batch-size: no global batch to scale by.
  auto hogwild = runDtrain("train --model mlp --dataset synthetic --synthetic-size 1024 --max-steps 2 "
                           "--progress off --scale-lr --strategy hogwild --workers 2");
  EXPECT_EQ(hogwild.code, 2);
  EXPECT_NE(hogwild.err.find("--scale-lr does not apply to --strategy hogwild"), std::string::npos)
      << hogwild.err;
}

// --augment crop,flip keeps the global-batch rule end to end: 2 workers x 16
// train the same model as 1 worker x 32, and not the one without augmentation.
TEST(Augment, TwoWorkersEqualOneWorkerWithTheGlobalBatch) {
  const std::string dir = tempDir();
  const std::string common = "train --model lenet --dataset synthetic --synthetic-size 256 "
                             "--progress off --seed 2 --max-steps 6 --lr 0.05 ";
  largeBatchOk(common + "--augment crop,flip --workers 2 --batch-size 16 --save " + dir + "/two.st");
  largeBatchOk(common + "--augment crop,flip --batch-size 32 --save " + dir + "/one.st");
  largeBatchOk(common + "--batch-size 32 --save " + dir + "/plain.st");
  auto two = runtime::loadSafetensors(dir + "/two.st"), one = runtime::loadSafetensors(dir + "/one.st"),
       plain = runtime::loadSafetensors(dir + "/plain.st");
  ASSERT_EQ(two.tensors.size(), one.tensors.size());
  double worst = 0, fromPlain = 0;
  for (size_t i = 0; i < one.tensors.size(); ++i) {
    if (one.tensors[i].second.dtype() != DType::F32) continue;
    const auto a = two.tensors[i].second.toVector(), b = one.tensors[i].second.toVector(),
               c = plain.tensors[i].second.toVector();
    for (size_t j = 0; j < a.size(); ++j) {
      worst = std::max(worst, double(std::fabs(a[j] - b[j])));
      fromPlain = std::max(fromPlain, double(std::fabs(c[j] - b[j])));
    }
  }
  EXPECT_LE(worst, 1e-5);
  EXPECT_GT(fromPlain, 1e-3);
  std::filesystem::remove_all(dir);
}

TEST(Augment, OneLineWhereItDoesNotApply) {
  auto r = runDtrain("train --model gpt-tiny --dataset text --max-steps 1 --progress off --augment flip");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--augment applies to image classification"), std::string::npos) << r.err;
  r = runDtrain("train --dataset synthetic --max-steps 1 --progress off --augment rotate");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("unknown --augment 'rotate'"), std::string::npos) << r.err;
}

}  // namespace
