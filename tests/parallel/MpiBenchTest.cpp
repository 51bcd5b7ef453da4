// `mpirun -np N dtrain bench allreduce --backend mpi` takes N from mpirun, as
// train does, without --workers (whose local default is 2).
#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"

namespace dtrain::test {
namespace {

#ifdef DTRAIN_MPIEXEC
void checkBench(int n) {
  auto r = runShell(mpirun(n) +
                    " bench allreduce --backend mpi --algo ring --min-bytes 1024 --max-bytes 4096 "
                    "--iters 2 --runs 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(doc.at("workers"), n) << r.out;
}

TEST(MpiBench, WorldSizeFromMpirunTwoRanks) { checkBench(2); }
TEST(MpiBench, WorldSizeFromMpirunThreeRanks) { checkBench(3); }

TEST(MpiBench, GivenWorkersMustStillMatch) {
  auto r = runShell(mpirun(2) + " bench allreduce --backend mpi --workers 3 --max-bytes 4096 --json");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--workers 3 does not match"), std::string::npos) << r.err;
}
#else
TEST(MpiBench, SkippedWithoutMpi) { GTEST_SKIP() << "built without MPI"; }
#endif

}  // namespace
}  // namespace dtrain::test
