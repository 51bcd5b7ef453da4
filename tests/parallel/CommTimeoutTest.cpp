// --comm-timeout (issue 32): a rank whose peer stops answering fails within the
// timeout with one line naming the peer it waited for, instead of hanging, under
// both backends; a slow but healthy peer does not trip it. The stalled peer is a
// --straggler whose per-step sleep outlasts the timeout, or (mpi, a call that
// blocks inside the MPI library) DTRAIN_TEST_STALL_RANK, which the watchdog ends.
#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"

namespace dtrain::test {
namespace {

const std::string kTimeoutRun =
    " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 10 --progress off "
    "--batch-size 16 --max-steps 20 ";

TEST(CommTimeout, LocalRankNamesThePeerItWaitedFor) {
  auto r = runShell("timeout 120 " + std::string(DTRAIN_BIN) + kTimeoutRun +
                    "--workers 2 --straggler 1:4000 --comm-timeout 1");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("on rank 0: timed out after 1000 ms waiting for rank 1 to join"), std::string::npos) << r.err;
}

TEST(CommTimeout, ASlowButHealthyPeerFinishes) {
  auto r = runShell("timeout 120 " + std::string(DTRAIN_BIN) + kTimeoutRun +
                    "--workers 2 --max-steps 5 --straggler 1:200 --comm-timeout 30");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(CommTimeout, OneRankRunsRefuseIt) {
  expectError(runDtrain(kTimeoutRun + "--comm-timeout 5"), 2,
              "--comm-timeout applies to runs of several ranks (--workers N or --backend mpi)");
}

#ifdef DTRAIN_MPIEXEC
TEST(CommTimeout, MpiRankNamesThePeerAndTheJobEnds) {
  auto r = runShell("timeout 120 env " + mpirun(2) + kTimeoutRun + "--backend mpi --straggler 1:6000 --comm-timeout 1");
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.code, 124) << "the job hung: " << r.err;
  EXPECT_NE(r.err.find("on rank 0: timed out after 1000 ms waiting for rank 1 to join"), std::string::npos) << r.err;
}

// Rank 1 never reaches MPI_Comm_dup, so rank 0 blocks inside MPI, where no
// deadline reaches: the watchdog prints the line and aborts the job.
TEST(CommTimeout, MpiWatchdogEndsACallBlockedInsideMpi) {
  auto r = runShell("DTRAIN_TEST_STALL_RANK=1 timeout 120 env " + mpirun(2) + kTimeoutRun +
                    "--backend mpi --comm-timeout 1");
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.code, 124) << "the job hung: " << r.err;
  EXPECT_NE(r.err.find("dtrain: rank 0: MPI_Comm_dup of the world waited "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for rank 1 without progress (--comm-timeout 1 s): a peer died or hangs; aborting the job"),
            std::string::npos) << r.err;
}
#endif

}  // namespace
}  // namespace dtrain::test
