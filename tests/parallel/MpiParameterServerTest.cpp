// Parameter servers on the mpi backend, through the dtrain binary under
// mpirun (-np S+W, the first S ranks serve): sync PS ends with the allreduce
// strategy's parameters and optimizer state, and an async job goes on when a
// worker dies.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"
#include "runtime/Safetensors.h"

namespace dtrain::test {
namespace {

Params loadAllTensors(const std::string& path) {
  Params p;
  for (auto& [name, t] : runtime::loadSafetensors(path).tensors)
    if (t.dtype() == DType::F32) p[name] = t.contiguous().toVector();
  return p;
}

// --save gathers the servers' shards and optimizer state; --load seeds the
// servers with them: 10 steps + save + load + 10 steps == 20 steps.
TEST(ParameterServerCheckpoint, ResumeContinuesTheServersState) {
  const std::string dir = tempDir();
  const std::string args =
      " train --dataset synthetic --synthetic-size 1000 --epochs 1000 --lr 0.01 --seed 7 "
      "--progress off --batch-size 16 --strategy ps --servers 2 --workers 2 ";
  auto full = runDtrain(args + "--max-steps 20 --save " + dir + "/full.safetensors");
  ASSERT_EQ(full.code, 0) << full.err;
  auto half = runDtrain(args + "--max-steps 10 --save " + dir + "/half.safetensors");
  ASSERT_EQ(half.code, 0) << half.err;
  auto rest = runDtrain(args + "--max-steps 20 --load " + dir + "/half.safetensors --save " + dir +
                        "/resumed.safetensors");
  ASSERT_EQ(rest.code, 0) << rest.err;
  expectClose(loadAllTensors(dir + "/resumed.safetensors"), loadAllTensors(dir + "/full.safetensors"),
              1e-6, "resumed ps run");
  std::filesystem::remove_all(dir);
}

#ifdef DTRAIN_MPIEXEC
const std::string kArgs =
    " train --dataset synthetic --synthetic-size 1000 --epochs 1000 --max-steps 50 --lr 0.01 "
    "--weight-decay 5e-4 --seed 7 --progress off --batch-size 16 --backend mpi ";

TEST(MpiParameterServer, SyncMatchesAllreduceParametersAndOptimizerState) {
  const std::string dir = tempDir();
  const std::string ps = dir + "/ps.safetensors", dp = dir + "/dp.safetensors";
  auto a = runShell(mpirun(2) + kArgs + "--save " + dp);
  ASSERT_EQ(a.code, 0) << a.err;
  auto r = runShell(mpirun(4) + kArgs + "--strategy ps --servers 2 --save " + ps);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  auto line = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(line.at("strategy"), "ps");
  EXPECT_EQ(line.at("workers"), 2);
  EXPECT_EQ(line.at("servers"), 2);
  EXPECT_EQ(line.at("server_updates"), nlohmann::json::array({50, 50}));
  expectClose(loadAllTensors(ps), loadAllTensors(dp), 1e-5, "mpi sync ps vs allreduce");
  std::filesystem::remove_all(dir);
}

TEST(MpiParameterServer, AsyncGoesOnWhenAWorkerDies) {
  auto r = runShell(mpirun(4) + kArgs +
                    "--strategy ps --servers 1 --consistency async --kill-worker 2:10 --ps-timeout 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("worker 2 (rank 3) sent nothing"), std::string::npos) << r.err;
  auto line = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(line.at("dead_workers"), nlohmann::json::array({2}));
  EXPECT_EQ(line.at("steps"), 50);
  EXPECT_EQ(line.at("server_updates"), nlohmann::json::array({50 * 2 + 10}));
}

// Worker 1 falls silent (heartbeats too) after its push of step 3 until the
// server declares it dead, then speaks again: re-admitted, it trains to the
// end. Workers 0 and 2 sleep 10 ms per step: >= 3 s, still running when it
// comes back (~0.2 s after the declaration).
TEST(MpiParameterServer, AWorkerDeclaredDeadIsReadmitted) {
  auto r = runShell(mpirun(4) +
                    " train --dataset synthetic --synthetic-size 1000 --epochs 1000 --max-steps 300 "
                    "--lr 0.01 --seed 7 --progress off --batch-size 16 --backend mpi --strategy ps "
                    "--servers 1 --consistency async --pause-worker 1:3 --ps-timeout 1 "
                    "--straggler 0:10 --straggler 2:10");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("worker 1 (rank 2), declared dead, speaks again: re-admitted"), std::string::npos)
      << r.err;
  auto line = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(line.at("dead_workers"), nlohmann::json::array({1}));
  EXPECT_EQ(line.at("readmitted_workers"), nlohmann::json::array({1}));
  EXPECT_EQ(line.at("steps"), 300);
  EXPECT_EQ(line.at("server_updates"), nlohmann::json::array({300 * 3}));
}
#else
TEST(MpiParameterServer, SkippedWithoutMpi) { GTEST_SKIP() << "built without MPI"; }
#endif

}  // namespace
}  // namespace dtrain::test
