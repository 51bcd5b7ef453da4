// ZeRO stages 1 and 2 (parallel/zero/): every stage ends with the same
// parameters and optimizer state (gathered by --save) as plain allreduce, on
// both backends, for mlp and gpt-tiny; --clip-grad-norm sees the global norm;
// --load restores the sharded state; the model states per rank in
// memory_per_rank follow ZeRO's Figure 1; bytes sent per step match allreduce;
// unsupported combinations are usage errors.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "TestData.h"
#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"
#include "runtime/Safetensors.h"

namespace dtrain::test {
namespace {

const std::string kMlp =
    " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 --max-steps 8 "
    "--batch-size 16 --optimizer adam --lr 0.01 --weight-decay 1e-3 --seed 7 --progress off "
    "--fusion-mb 0.05 ";

std::string gptArgs(const std::string& dir) {
  const std::string text = dir + "/text.txt";
  std::ofstream(text) << sampleText(20000, 12345);
  return " train --model gpt-tiny --text-file " + text +
         " --max-steps 6 --batch-size 4 --seed 3 --eval-batches 1 --progress off "
         "--fusion-mb 0.05 ";
}

Params loadAll(const std::string& path) { return loadCheckpointTensors(path); }

nlohmann::json run(const std::string& command) {
  auto r = runShell(command);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.lastLine());
}

int64_t modelStates(const nlohmann::json& rank) {
  return rank.at("parameters").get<int64_t>() + rank.at("gradients").get<int64_t>() +
         rank.at("optimizer_state").get<int64_t>();
}

// Plain allreduce vs --zero 1 and 2 with N local workers: same checkpoint
// (parameters and the full optimizer state), and per rank model states within
// 5% of 16P, 8P + 8P/N, 4P + 12P/N.
void checkLocal(const std::string& args, int n, const std::string& what) {
  const std::string dir = tempDir();
  const std::string base = std::string(DTRAIN_BIN) + args + " --workers " + std::to_string(n);
  auto plain = run(base + " --save " + dir + "/plain.safetensors");
  ASSERT_FALSE(plain.is_null());
  const Params ref = loadAll(dir + "/plain.safetensors");
  // P: the trained parameters, those with optimizer state (a checkpoint also
  // holds buffers).
  int64_t p = 0;
  for (auto& [name, v] : ref)
    if (name.rfind("optimizer.", 0) != 0 && ref.count("optimizer." + name + ".exp_avg"))
      p += static_cast<int64_t>(v.size());
  ASSERT_GT(p, 0);
  ASSERT_EQ(plain.at("memory_per_rank").size(), static_cast<size_t>(n));
  const double sent = plain.at("bytes_sent_per_worker").get<double>();
  const double expected[3] = {16.0 * p, 8.0 * p + 8.0 * p / n, 4.0 * p + 12.0 * p / n};
  for (auto& rank : plain.at("memory_per_rank"))
    EXPECT_NEAR(modelStates(rank), expected[0], 0.05 * expected[0]) << what << " plain " << rank;
  for (int stage : {1, 2}) {
    const std::string file = dir + "/zero" + std::to_string(stage) + ".safetensors";
    auto z = run(base + " --zero " + std::to_string(stage) + " --save " + file);
    ASSERT_FALSE(z.is_null());
    const std::string label = what + " --zero " + std::to_string(stage);
    expectClose(loadAll(file), ref, 1e-5, label);
    ASSERT_EQ(z.at("memory_per_rank").size(), static_cast<size_t>(n)) << label;
    for (auto& rank : z.at("memory_per_rank"))
      EXPECT_NEAR(modelStates(rank), expected[stage], 0.05 * expected[stage]) << label << rank;
    // Reduce-scatter + allgather move what one allreduce moves.
    EXPECT_NEAR(z.at("bytes_sent_per_worker").get<double>(), sent, 0.05 * sent) << label;
  }
  std::filesystem::remove_all(dir);
}

// `base` (a whole dtrain command line) with plain allreduce and with --zero 2
// ends with the same checkpoint: parameters and the full optimizer state.
void expectZero2MatchesPlain(const std::string& base, const std::string& what) {
  const std::string dir = tempDir();
  ASSERT_FALSE(run(base + " --save " + dir + "/plain.safetensors").is_null());
  ASSERT_FALSE(run(base + " --zero 2 --save " + dir + "/z.safetensors").is_null());
  expectClose(loadAll(dir + "/z.safetensors"), loadAll(dir + "/plain.safetensors"), 1e-5, what);
  std::filesystem::remove_all(dir);
}

TEST(Zero, MlpTwoAndFourWorkersMatchAllreduce) {
  checkLocal(kMlp, 2, "mlp N=2");
  checkLocal(kMlp, 4, "mlp N=4");
}

TEST(Zero, GptTinyMatchesAllreduce) {
  const std::string dir = tempDir();
  checkLocal(gptArgs(dir), 2, "gpt-tiny N=2");
  std::filesystem::remove_all(dir);
}

TEST(Zero, ThreeWorkersSgdAndAccumulationMatchAllreduce) {
  // N = 3 pads every bucket; sgd's momentum and --accumulate go through the same slices.
  expectZero2MatchesPlain(std::string(DTRAIN_BIN) +
                              " train --model mlp --dataset synthetic --synthetic-size 512 "
                              "--epochs 100 --max-steps 6 --batch-size 8 --progress off --workers 3 "
                              "--fusion-mb 0.05 --optimizer sgd --momentum 0.9 --weight-decay 1e-3 "
                              "--accumulate 2",
                          "N=3 sgd --accumulate 2 --zero 2");
}

TEST(Zero, ClippingSeesTheGlobalNorm) {
  // A low threshold clips every step: a per-shard norm would clip differently.
  expectZero2MatchesPlain(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --clip-grad-norm 0.05",
                          "clip --zero 2");
}

TEST(Zero, LoadRestoresTheShardedState) {
  // 4 + 4 steps with a checkpoint between equal 8 steps (plain allreduce).
  const std::string dir = tempDir();
  std::string args = kMlp;
  args.replace(args.find("--max-steps 8"), 13, "--max-steps 4");
  const std::string base = std::string(DTRAIN_BIN) + args + " --workers 2";
  ASSERT_FALSE(run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --save " + dir + "/ref.safetensors")
                   .is_null());
  ASSERT_FALSE(run(base + " --zero 2 --save " + dir + "/half.safetensors").is_null());
  ASSERT_FALSE(run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --zero 2 --load " + dir +
                   "/half.safetensors --save " + dir + "/resumed.safetensors")
                   .is_null());
  expectClose(loadAll(dir + "/resumed.safetensors"), loadAll(dir + "/ref.safetensors"), 1e-5,
              "--zero 2 resumed");
  std::filesystem::remove_all(dir);
}

TEST(Zero, EveryStrategyReportsMemoryPerRank) {
  auto single = run(std::string(DTRAIN_BIN) + kMlp);
  ASSERT_EQ(single.at("memory_per_rank").size(), 1u);
  EXPECT_GT(single.at("memory_per_rank")[0].at("activations_peak").get<int64_t>(), 0);
  EXPECT_GT(single.at("memory_per_rank")[0].at("optimizer_state").get<int64_t>(), 0);
  auto hog = run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --strategy hogwild");
  ASSERT_EQ(hog.at("memory_per_rank").size(), 2u);
  auto ps = run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --strategy ps");
  ASSERT_GE(ps.at("memory_per_rank").size(), 1u);
}

TEST(Zero, UnsupportedCombinationsAreUsageErrors) {
  expectError(runDtrain(kMlp + "--workers 2 --zero 1 --compress topk"), 2, "--zero");
  expectError(runDtrain(kMlp + "--workers 2 --zero 1 --strategy ps"), 2, "--zero");
  expectError(runDtrain(kMlp + "--workers 2 --zero 3"), 2, "--zero 3");
  expectError(runDtrain(kMlp + "--zero 1"), 2, "--zero");
}

#ifdef DTRAIN_MPIEXEC
TEST(Zero, MpiMatchesLocalAllreduce) {
  const std::string dir = tempDir();
  ASSERT_FALSE(run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --save " + dir + "/ref.safetensors")
                   .is_null());
  auto z = run(mpirun(2) + kMlp + " --backend mpi --zero 2 --save " + dir + "/z.safetensors");
  ASSERT_FALSE(z.is_null());
  EXPECT_EQ(z.at("memory_per_rank").size(), 2u);
  expectClose(loadAll(dir + "/z.safetensors"), loadAll(dir + "/ref.safetensors"), 1e-5,
              "mpi --zero 2");
  // gpt-tiny, stage 1.
  const std::string gpt = gptArgs(dir);
  ASSERT_FALSE(
      run(std::string(DTRAIN_BIN) + gpt + " --workers 2 --save " + dir + "/gref.safetensors").is_null());
  ASSERT_FALSE(run(mpirun(2) + gpt + " --backend mpi --zero 1 --save " + dir + "/gz.safetensors")
                   .is_null());
  expectClose(loadAll(dir + "/gz.safetensors"), loadAll(dir + "/gref.safetensors"), 1e-5,
              "mpi gpt-tiny --zero 1");
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace dtrain::test
