// The mpi backend: `mpirun -np N dtrain train --backend mpi` ends with the same
// parameters as `dtrain train` with batch N*B (N = 2 and 3, default algorithm,
// overlap on; N = 2 also without overlap and with the native MPI_Allreduce),
// and only rank 0 prints the final line.
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
    "--weight-decay 5e-4 --seed 7 --progress off ";

void checkMpi(const std::string& model, int n, const std::string& extra) {
  const std::string dir = tempDir();
  const std::string ref = dir + "/ref.safetensors", dp = dir + "/dp.safetensors";
  auto single = runDtrain(kArgs + "--model " + model + " --batch-size " + std::to_string(16 * n) +
                          " --save " + ref);
  ASSERT_EQ(single.code, 0) << single.err;
  auto r = runShell(mpirun(n) + kArgs + "--backend mpi --model " + model +
                    " --batch-size 16 --save " + dp + " " + extra);
  ASSERT_EQ(r.code, 0) << r.err;
  // One JSON line, from rank 0.
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  auto line = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(line.at("workers"), n);
  EXPECT_EQ(line.at("backend"), "mpi");
  EXPECT_EQ(line.at("strategy"), "allreduce");
  expectClose(loadModelParams(dp), loadModelParams(ref), 1e-5,
              model + " mpi N=" + std::to_string(n) + " " + extra);
  std::filesystem::remove_all(dir);
}

TEST(MpiEquivalence, MlpTwoRanks) { checkMpi("mlp", 2, ""); }
TEST(MpiEquivalence, LenetThreeRanks) { checkMpi("lenet", 3, ""); }
TEST(MpiEquivalence, NoOverlapNativeAllreduce) {
  checkMpi("mlp", 2, "--no-overlap --allreduce-algo native --fusion-mb 0.05");
}

TEST(MpiTimeline, RankZeroWritesEveryRanksSpans) {
  const std::string dir = tempDir();
  auto r = runShell(mpirun(2) + kArgs + "--backend mpi --max-steps 3 --timeline " + dir + "/t.json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto doc = nlohmann::json::parse(slurp(dir + "/t.json"));
  std::set<int> pids;
  for (auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X") pids.insert(e.at("pid").get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  std::filesystem::remove_all(dir);
}
#else
TEST(MpiEquivalence, SkippedWithoutMpi) { GTEST_SKIP() << "built without MPI"; }
#endif

}  // namespace
}  // namespace dtrain::test
