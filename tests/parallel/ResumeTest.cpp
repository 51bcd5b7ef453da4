// Resuming at another world size (issue 14): a checkpoint of N workers goes on
// with M workers exactly as an M-worker run would from that step (the data
// order is a function of the global step, the optimizer state is whole in the
// file, ZeRO re-shards it), so N x B for K steps then M x (N B / M) equals one
// worker with batch N B. Periodic checkpoints (--checkpoint-every) and
// --resume auto, which skips a checkpoint cut short.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"

namespace dtrain::test {
namespace {

// 512 samples: global batch 48 has 10 steps per epoch, so resuming at step 7
// and going to 15 crosses an epoch inside the resumed run. SGD with momentum
// (its buffer is the optimizer state carried over): Adam's first steps move
// every weight by about +-lr whatever its gradient's size, so where a gradient
// is ~0 the summation order of 1 or N workers alone decides the sign.
const std::string kTrain = std::string(DTRAIN_BIN) +
                           " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 "
                           "--lr 0.05 --momentum 0.9 --seed 5 --progress off ";

void runOk(const std::string& command) {
  auto r = runShell(command);
  ASSERT_EQ(r.code, 0) << command << "\n" << r.err;
}

// `first` (K steps, saves) then `second` (loads, to `total`) against one worker
// with the global batch: the model and the optimizer state at 1e-5.
void expectResumeMatches(const std::string& first, const std::string& second, int64_t k,
                         int64_t total, int64_t globalBatch, const std::string& what) {
  const std::string dir = tempDir();
  runOk(first + " --max-steps " + std::to_string(k) + " --save " + dir + "/a.safetensors");
  runOk(second + " --max-steps " + std::to_string(total) + " --load " + dir + "/a.safetensors --save " +
        dir + "/b.safetensors");
  runOk(kTrain + "--batch-size " + std::to_string(globalBatch) + " --max-steps " +
        std::to_string(total) + " --save " + dir + "/ref.safetensors");
  expectClose(loadCheckpointTensors(dir + "/b.safetensors"),
              loadCheckpointTensors(dir + "/ref.safetensors"), 1e-5, what);
  std::filesystem::remove_all(dir);
}

TEST(ResumeWorldSize, FourWorkersThenTwo) {
  expectResumeMatches(kTrain + "--workers 4 --batch-size 16", kTrain + "--workers 2 --batch-size 32",
                      10, 20, 64, "4 x 16 -> 2 x 32");
}

TEST(ResumeWorldSize, TwoWorkersThenThreeAcrossAnEpoch) {
  expectResumeMatches(kTrain + "--workers 2 --batch-size 24", kTrain + "--workers 3 --batch-size 16",
                      7, 15, 48, "2 x 24 -> 3 x 16");
}

TEST(ResumeWorldSize, ZeroStagesReshardTheOptimizerState) {
  expectResumeMatches(kTrain + "--workers 4 --batch-size 16 --zero 2",
                      kTrain + "--workers 2 --batch-size 32 --zero 1", 10, 20, 64,
                      "--zero 2 x 4 -> --zero 1 x 2");
  expectResumeMatches(kTrain + "--workers 2 --batch-size 24 --zero 3",
                      kTrain + "--workers 3 --batch-size 8 --zero 3 --accumulate 2", 10, 20, 48,
                      "--zero 3 x 2 -> --zero 3 x 3");
}

#ifdef DTRAIN_MPIEXEC
TEST(ResumeWorldSize, MpiCheckpointGoesOnLocally) {
  expectResumeMatches(mpirun(2) + kTrain.substr(std::string(DTRAIN_BIN).size()) +
                          "--backend mpi --batch-size 32",
                      kTrain + "--batch-size 64", 10, 20, 64, "mpi 2 x 32 -> 1 x 64");
}
#endif

TEST(ResumeWorldSize, SaysWhenTheWorldOrTheGlobalBatchChanged) {
  const std::string dir = tempDir();
  runOk(kTrain + "--workers 2 --batch-size 16 --compress onebit --max-steps 4 --save " + dir + "/a.safetensors");
  auto r = runShell(kTrain + "--workers 4 --batch-size 16 --compress onebit --max-steps 6 --load " + dir +
                    "/a.safetensors");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("taken by 2 workers, this run has 4: their per-rank compression residuals "
                       "start again at zero"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("global batch of 32 samples, this run's is 64"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

std::vector<std::string> names(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// --checkpoint-every 3 to step 10 keeps the newest two (step 9 and the last, 10);
// --resume auto goes on from 10 to 20 (writing its last, 20) and ends where an
// uninterrupted run does; with step 20's file cut short it goes on from 10,
// warning, and still does.
TEST(PeriodicCheckpoints, ResumeAutoGoesOnFromTheNewestValidOne) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  const std::string run = kTrain + "--workers 2 --batch-size 16 ";
  runOk(run + "--max-steps 20 --save " + dir + "/straight.safetensors");
  runOk(run + "--max-steps 10 --checkpoint-every 3 --keep-checkpoints 2 --checkpoint-dir " + ckpt);
  EXPECT_EQ(names(ckpt), (std::vector<std::string>{"latest.safetensors", "step-000000009.safetensors",
                                                   "step-000000010.safetensors"}));
  const Params straight = loadCheckpointTensors(dir + "/straight.safetensors");
  auto resumed = runShell(run + "--max-steps 20 --resume auto --checkpoint-dir " + ckpt + " --save " +
                          dir + "/resumed.safetensors");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("step-000000010.safetensors at step 10"), std::string::npos) << resumed.err;
  expectClose(loadCheckpointTensors(dir + "/resumed.safetensors"), straight, 1e-5, "resume auto");

  // A job killed while writing step 20: the file is cut short.
  const std::string twenty = ckpt + "/step-000000020.safetensors";
  std::filesystem::resize_file(twenty, std::filesystem::file_size(twenty) / 2);
  auto fallback = runShell(run + "--max-steps 20 --resume auto --checkpoint-dir " + ckpt + " --save " +
                           dir + "/fallback.safetensors");
  ASSERT_EQ(fallback.code, 0) << fallback.err;
  EXPECT_NE(fallback.err.find("skipping " + twenty), std::string::npos) << fallback.err;
  EXPECT_NE(fallback.err.find("at step 10"), std::string::npos) << fallback.err;
  expectClose(loadCheckpointTensors(dir + "/fallback.safetensors"), straight, 1e-5, "fallback");
  std::filesystem::remove_all(dir);
}

// Under ZeRO the periodic checkpoint gathers the sharded optimizer state (a
// collective between steps); a plain allreduce run resumes from it exactly.
TEST(PeriodicCheckpoints, ZeroCheckpointsResumeWithoutZero) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  const std::string run = kTrain + "--workers 2 --batch-size 16 ";
  runOk(run + "--max-steps 20 --save " + dir + "/straight.safetensors");
  runOk(run + "--zero 2 --max-steps 10 --checkpoint-every 3 --checkpoint-dir " + ckpt);
  runOk(run + "--max-steps 20 --resume auto --checkpoint-dir " + ckpt + " --save " + dir + "/r.safetensors");
  expectClose(loadCheckpointTensors(dir + "/r.safetensors"),
              loadCheckpointTensors(dir + "/straight.safetensors"), 1e-5, "zero 2 periodic -> plain");
  std::filesystem::remove_all(dir);
}

TEST(PeriodicCheckpoints, ResumeAutoWithAnEmptyDirectoryStartsFresh) {
  const std::string dir = tempDir();
  auto r = runShell(kTrain + "--batch-size 16 --max-steps 2 --resume auto --checkpoint-dir " + dir + "/none");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("no checkpoint in " + dir + "/none: starting fresh"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(PeriodicCheckpoints, BadFlagsAreUsageErrors) {
  const std::string quick = "train --dataset synthetic --synthetic-size 256 --max-steps 2 --progress off ";
  expectError(runDtrain(quick + "--checkpoint-every 5"), 2, "--checkpoint-every needs --checkpoint-dir");
  expectError(runDtrain(quick + "--resume auto"), 2, "--resume auto needs --checkpoint-dir");
  expectError(runDtrain(quick + "--resume /nonexistent/x.safetensors"), 2,
              "--resume /nonexistent/x.safetensors: no such checkpoint");
  expectError(runDtrain(quick + "--resume a --load b"), 2, "--resume and --load both name a checkpoint");
  expectError(runDtrain(quick + "--keep-checkpoints 0 --checkpoint-every 1 --checkpoint-dir /tmp"), 2, "--keep-checkpoints must be >= 1 (got 0)");
  expectError(runDtrain(quick + "--workers 2 --strategy ps --checkpoint-every 1 --checkpoint-dir /tmp"), 2,
              "--checkpoint-every needs the single, allreduce, pipeline or tensor strategy");
  expectError(runDtrain(quick + "--checkpoint-every 1 --checkpoint-dir /etc/hostname/sub"), 2,
              "--checkpoint-dir /etc/hostname/sub: cannot create the directory");
}

}  // namespace
}  // namespace dtrain::test
