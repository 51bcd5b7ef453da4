// --offload (core/Offload.h): the optimizer state (and with --zero 3 the
// parameter shards) live in a file on disk between uses. Training is bitwise
// what it is without offload (one process, allreduce, ZeRO 1-3), the offloaded
// bytes are reported per rank and leave the allocator's figures, --save and
// --load work, and bad combinations are usage errors.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"
#include "runtime/Safetensors.h"

namespace dtrain::test {
namespace {

const std::string kMlp =
    " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 --max-steps 6 "
    "--batch-size 16 --optimizer adam --lr 0.01 --weight-decay 1e-3 --seed 7 --progress off "
    "--fusion-mb 0.05 ";

nlohmann::json run(const std::string& command) {
  auto r = runShell(command);
  EXPECT_EQ(r.code, 0) << command << "\n" << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.lastLine());
}

// `args` with and without `offload` end with bitwise the same checkpoint; the
// offloaded run reports its state as offloaded on every rank.
void expectSameWithOffload(const std::string& args, const std::string& offload, int ranks) {
  const std::string dir = tempDir();
  const std::string base = std::string(DTRAIN_BIN) + args;
  auto plain = run(base + " --save " + dir + "/plain.safetensors");
  auto off = run(base + " --offload " + offload + " --offload-dir " + dir + "/files --save " + dir +
                 "/off.safetensors");
  ASSERT_FALSE(plain.is_null());
  ASSERT_FALSE(off.is_null());
  expectClose(loadCheckpointTensors(dir + "/off.safetensors"),
              loadCheckpointTensors(dir + "/plain.safetensors"), 0.0, args + " --offload " + offload);
  ASSERT_EQ(off.at("memory_per_rank").size(), static_cast<size_t>(ranks));
  for (size_t r = 0; r < off.at("memory_per_rank").size(); ++r) {
    const auto& mine = off.at("memory_per_rank")[r];
    const auto& theirs = plain.at("memory_per_rank")[r];
    const int64_t state = theirs.at("optimizer_state").get<int64_t>();
    int64_t expected = state;  // the slots; the step counts stay in memory
    if (offload == "params") expected += theirs.at("parameters").get<int64_t>();
    EXPECT_NEAR(mine.at("offloaded").get<double>(), expected, 0.02 * expected) << mine;
    EXPECT_LT(mine.at("optimizer_state").get<int64_t>(), state / 50) << mine;
    EXPECT_LT(mine.at("peak").get<int64_t>(), theirs.at("peak").get<int64_t>()) << mine;
    if (offload == "params") {
      EXPECT_EQ(mine.at("parameters").get<int64_t>(), 0) << mine;
    }
    EXPECT_EQ(theirs.at("offloaded").get<int64_t>(), 0);
  }
  EXPECT_EQ(off.at("offload").get<std::string>(), offload);
  EXPECT_GT(off.at("rss_peak_bytes").get<int64_t>(), 0);
  // The files had no names: the directory is empty.
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/files"));
  std::filesystem::remove_all(dir);
}

TEST(Offload, OneProcessOptimizerStateIsBitwiseUnchanged) {
  expectSameWithOffload(withoutFusion(kMlp), "optimizer", 1);
}

TEST(Offload, AllreduceAndZeroStagesAreBitwiseUnchanged) {
  expectSameWithOffload(kMlp + " --workers 2", "optimizer", 2);
  expectSameWithOffload(kMlp + " --workers 2 --zero 2", "optimizer", 2);
  expectSameWithOffload(kMlp + " --workers 3 --zero 3 --accumulate 2", "params", 3);
}

TEST(Offload, ResumesFromACheckpointOfAnOffloadedRun) {
  // 3 + 3 steps, offloaded, with a checkpoint between, equal 6 steps in memory.
  const std::string dir = tempDir();
  std::string half = kMlp;
  half.replace(half.find("--max-steps 6"), 13, "--max-steps 3");
  const std::string bin = std::string(DTRAIN_BIN);
  ASSERT_FALSE(run(bin + kMlp + " --workers 2 --zero 3 --save " + dir + "/ref.safetensors").is_null());
  ASSERT_FALSE(run(bin + half + " --workers 2 --zero 3 --offload params --offload-dir " + dir +
                   " --save " + dir + "/half.safetensors")
                   .is_null());
  ASSERT_FALSE(run(bin + kMlp + " --workers 2 --zero 3 --offload params --offload-dir " + dir +
                   " --load " + dir + "/half.safetensors --save " + dir + "/resumed.safetensors")
                   .is_null());
  expectClose(loadCheckpointTensors(dir + "/resumed.safetensors"),
              loadCheckpointTensors(dir + "/ref.safetensors"), 1e-6, "offloaded resume");
  std::filesystem::remove_all(dir);
}

TEST(Offload, BadCombinationsAreUsageErrors) {
  expectError(runDtrain(withoutFusion(kMlp) + "--offload disk"), 2, "unknown --offload 'disk'");
  expectError(runDtrain(kMlp + "--workers 2 --offload params"), 2, "--offload params needs --zero 3");
  expectError(runDtrain(withoutFusion(kMlp) + "--offload-dir /tmp"), 2, "--offload-dir needs --offload");
  expectError(runDtrain(withoutFusion(kMlp) + "--workers 2 --strategy ps --offload optimizer"), 2, "--offload");
  expectError(runDtrain(withoutFusion(kMlp) + "--offload optimizer --offload-dir /proc/version/x"), 2,
              "--offload-dir /proc/version/x");
}

}  // namespace
}  // namespace dtrain::test
