// No hang when a peer dies or stops (issue 32), with one line naming the peer:
// - --comm-timeout (mpi): a peer that sends no heartbeat (its process frozen by
//   DTRAIN_TEST_FREEZE_RANK, as a host that froze or lost its link) fails the
//   waits on it after that long, while a peer that is alive but slow (a
//   --straggler whose sleep outlasts it) keeps beating and is waited for;
// - --call-timeout (both backends): a peer that is alive but never comes (a
//   straggler sleeping longer than it, or DTRAIN_TEST_STALL_RANK, where the call
//   blocks inside the MPI library and the watchdog ends the job).
#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"

namespace dtrain::test {
namespace {

const std::string kTimeoutRun =
    " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 10 --progress off "
    "--batch-size 16 --max-steps 20 ";

TEST(CommTimeout, LocalRankNamesThePeerItWaitedFor) {
  auto r = runShell("timeout 120 " + std::string(DTRAIN_BIN) + kTimeoutRun +
                    "--workers 2 --straggler 1:4000 --call-timeout 1");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("on rank 0: timed out after 1000 ms waiting for rank 1 to join"), std::string::npos) << r.err;
}

TEST(CommTimeout, ASlowButHealthyPeerFinishes) {
  auto r = runShell("timeout 120 " + std::string(DTRAIN_BIN) + kTimeoutRun +
                    "--workers 2 --max-steps 5 --straggler 1:200 --call-timeout 30");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(CommTimeout, OneRankRunsRefuseTheCallTimeout) {
  expectError(runDtrain(kTimeoutRun + "--call-timeout 5"), 2,
              "--call-timeout applies to runs of several ranks (--workers N or --backend mpi)");
}

TEST(CommTimeout, LocalRanksRefuseTheHeartbeatTimeout) {
  expectError(runDtrain(kTimeoutRun + "--workers 2 --comm-timeout 5"), 2,
              "--comm-timeout applies to --backend mpi (local ranks are threads of one process");
}

#ifdef DTRAIN_MPIEXEC
TEST(CommTimeout, MpiRankNamesThePeerAndTheJobEnds) {
  auto r = runShell("timeout 120 env " + mpirun(2) + kTimeoutRun + "--backend mpi --straggler 1:6000 --call-timeout 1");
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.code, 124) << "the job hung: " << r.err;
  EXPECT_NE(r.err.find("on rank 0: timed out after 1000 ms waiting for rank 1 to join"), std::string::npos) << r.err;
}

// Rank 1 never reaches MPI_Comm_dup, so rank 0 blocks inside MPI, where no
// deadline reaches: the watchdog prints the line and aborts the job.
TEST(CommTimeout, MpiWatchdogEndsACallBlockedInsideMpi) {
  auto r = runShell("DTRAIN_TEST_STALL_RANK=1 timeout 120 env " + mpirun(2) + kTimeoutRun +
                    "--backend mpi --call-timeout 1");
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.code, 124) << "the job hung: " << r.err;
  EXPECT_NE(r.err.find("dtrain: rank 0: MPI_Comm_dup of the world waited "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for rank 1 without progress (--call-timeout 1 s): a peer hangs; aborting the job"),
            std::string::npos) << r.err;
}

// Rank 1's whole process stops (SIGSTOP) once its world is set up: its beats
// stop, and rank 0's first wait on it fails after --comm-timeout, long before
// the per-call limit (300 s); mpirun then ends the job, the stopped rank too.
TEST(CommTimeout, MpiFrozenPeerFailsItsWaitersAfterTheHeartbeatTimeout) {
  auto r = runShell("DTRAIN_TEST_FREEZE_RANK=1 timeout 120 env " + mpirun(2) + kTimeoutRun +
                    "--backend mpi --comm-timeout 1");
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.code, 124) << "the job hung: " << r.err;
  EXPECT_NE(r.err.find("dtrain: rank 0: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": rank 1 sent no heartbeat for "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" s (--comm-timeout 1.0 s): it died, is stopped or its link is down"),
            std::string::npos) << r.err;
}

// A peer asleep for longer than --comm-timeout (a straggler's 4 s per step) is
// alive: its heartbeat thread keeps beating, and the run finishes.
TEST(CommTimeout, MpiSlowPeerKeepsBeatingAndFinishes) {
  auto r = runShell("timeout 120 env " + mpirun(2) + kTimeoutRun +
                    "--backend mpi --max-steps 2 --straggler 1:4000 --comm-timeout 2");
  EXPECT_EQ(r.code, 0) << r.err;
}
#endif

}  // namespace
}  // namespace dtrain::test
