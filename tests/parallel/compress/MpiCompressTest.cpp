// Compression on the mpi backend: `mpirun -np 2 dtrain train --backend mpi
// --compress X` ends with the parameters of `dtrain train --workers 2 --compress X`
// on the local backend: bitwise for the allgather compressors (the same messages,
// decoded and summed in the same order), within float rounding for those that
// allreduce (the backends' algorithms may add in another order). fp16 with
// --allreduce-algo native runs dtrain's ring (MPI has no fp16 sum).
#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"
#include "runtime/Safetensors.h"

namespace dtrain::test {
namespace {

#ifdef DTRAIN_MPIEXEC
const std::string kArgs =
    " train --dataset synthetic --synthetic-size 1000 --epochs 1000 --max-steps 30 --lr 0.01 "
    "--batch-size 16 --seed 7 --progress off ";

void checkMpi(const std::string& compress, double tol, const std::string& mpiOnly = "") {
  const std::string dir = tempDir();
  const std::string local = dir + "/local.safetensors", mpi = dir + "/mpi.safetensors";
  auto a = runDtrain(kArgs + "--workers 2 --compress " + compress + " --save " + local);
  ASSERT_EQ(a.code, 0) << a.err;
  auto b = runShell(mpirun(2) + kArgs + "--backend mpi --compress " + compress + " --save " + mpi +
                    " " + mpiOnly);
  ASSERT_EQ(b.code, 0) << b.err;
  auto line = nlohmann::json::parse(b.lastLine());
  EXPECT_EQ(line.at("backend"), "mpi");
  EXPECT_EQ(line.at("compress"), compress.substr(0, compress.find(' ')));
  if (tol == 0)
    EXPECT_EQ(loadModelParams(mpi), loadModelParams(local)) << compress;
  else
    expectClose(loadModelParams(mpi), loadModelParams(local), tol, "mpi vs local " + compress);
  std::filesystem::remove_all(dir);
}

TEST(MpiCompress, OneBitIsBitwiseTheLocalRun) { checkMpi("onebit", 0); }
TEST(MpiCompress, TwoStageQsgdIsBitwiseTheLocalRun) {
  checkMpi("qsgd --compress-collective two-stage", 0);
}
TEST(MpiCompress, TopKIsBitwiseTheLocalRun) { checkMpi("topk --compress-ratio 0.05", 0); }
TEST(MpiCompress, PowerSgd) { checkMpi("powersgd --compress-rank 2 --compress-start-step 5", 1e-4); }
TEST(MpiCompress, Fp16WithNativeAlgorithm) { checkMpi("fp16", 1e-3, "--allreduce-algo native"); }
#endif

}  // namespace
}  // namespace dtrain::test
