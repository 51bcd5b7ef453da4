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

#ifdef DTRAIN_MPIEXEC
const std::string kArgs =
    " train --dataset synthetic --synthetic-size 1000 --epochs 1000 --max-steps 50 --lr 0.01 "
    "--weight-decay 5e-4 --seed 7 --progress off --batch-size 16 --backend mpi ";

Params loadAll(const std::string& path) {
  Params p;
  for (auto& [name, t] : runtime::loadSafetensors(path).tensors)
    if (t.dtype() == DType::F32) p[name] = t.contiguous().toVector();
  return p;
}

std::string mpirun(int n) {
  return std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                     "OMPI_MCA_rmaps_base_oversubscribe=1 DTRAIN_COMM_TIMEOUT_MS=60000 ") +
         DTRAIN_MPIEXEC + " --oversubscribe -np " + std::to_string(n) + " " + DTRAIN_BIN;
}

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
  expectClose(loadAll(ps), loadAll(dp), 1e-5, "mpi sync ps vs allreduce");
  std::filesystem::remove_all(dir);
}

TEST(MpiParameterServer, AsyncGoesOnWhenAWorkerDies) {
  auto r = runShell(mpirun(4) + kArgs +
                    "--strategy ps --servers 1 --consistency async --kill-worker 2:10 --ps-timeout 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("worker 2 (rank 3) sent nothing"), std::string::npos) << r.err;
  auto line = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(line.at("dead_workers"), nlohmann::json::array({2}));
  EXPECT_EQ(line.at("steps"), 50);
  EXPECT_EQ(line.at("server_updates"), nlohmann::json::array({50 * 2 + 10}));
}
#else
TEST(MpiParameterServer, SkippedWithoutMpi) { GTEST_SKIP() << "built without MPI"; }
#endif

}  // namespace
}  // namespace dtrain::test
