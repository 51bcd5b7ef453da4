// Bad input to the data-parallel flags: one line on stderr, exit code 2.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli/CliRunner.h"

using namespace dtrain::test;

namespace {
const std::string kQuick =
    "train --dataset synthetic --synthetic-size 512 --max-steps 3 --progress off ";

void expectUsage(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.code, 2) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_EQ(r.out, "");
}
}  // namespace

TEST(ParallelErrors, WorkersBelowOne) {
  expectUsage(runDtrain(kQuick + "--workers 0"), "--workers must be >= 1");
  expectUsage(runDtrain(kQuick + "--workers -2"), "--workers");
}

TEST(ParallelErrors, UnknownStrategyBackendAlgorithm) {
  expectUsage(runDtrain(kQuick + "--workers 2 --strategy gossip"), "unknown --strategy 'gossip'");
  expectUsage(runDtrain(kQuick + "--workers 2 --backend nccl"), "unknown --backend 'nccl'");
  expectUsage(runDtrain(kQuick + "--workers 2 --allreduce-algo butterfly"),
              "--allreduce-algo: unknown allreduce algorithm 'butterfly'");
  // MPI_Allreduce exists on the mpi backend only.
  expectUsage(runDtrain(kQuick + "--workers 2 --allreduce-algo native"),
              "--allreduce-algo native is not available on the local backend");
}

TEST(ParallelErrors, SingleStrategyWithSeveralWorkers) {
  expectUsage(runDtrain(kQuick + "--workers 2 --strategy single"), "--strategy single");
}

TEST(ParallelErrors, NonPositiveFusionSize) {
  expectUsage(runDtrain(kQuick + "--workers 2 --fusion-mb 0"), "--fusion-mb must be a positive");
  expectUsage(runDtrain(kQuick + "--workers 2 --fusion-mb -1"), "--fusion-mb");
}

TEST(ParallelErrors, AccumulateBelowOne) {
  expectUsage(runDtrain(kQuick + "--accumulate 0"), "--accumulate must be >= 1");
}

TEST(ParallelErrors, MpiBackendWithoutMpirun) {
  // Outside mpirun (or in a build without MPI) --backend mpi cannot start.
  auto r = runShell("env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_SIZE " +
                    std::string(DTRAIN_BIN) + " " + kQuick + "--backend mpi");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(r.err.find("mpirun") != std::string::npos ||
              r.err.find("built without MPI") != std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ParallelRuns, LocalWorkersPrintOneLineWithTheCommunicationFigures) {
  auto r = runDtrain(kQuick + "--workers 2 --batch-size 16 --timeline /dev/null");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  for (const char* k : {"\"workers\":2", "\"strategy\":\"allreduce\"", "\"backend\":\"local\"",
                        "\"comm_ms\"", "\"hidden_ms\"", "\"bytes_sent_per_worker\""})
    EXPECT_NE(r.out.find(k), std::string::npos) << k << " in " << r.out;
}
