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
  expectUsage(runDtrain(kQuick + "--workers 0"), "--workers must be in [1, 4096] (got 0)");
  expectUsage(runDtrain(kQuick + "--workers -2"), "--workers");
}

TEST(ParallelErrors, UnknownStrategyBackendAlgorithm) {
  expectUsage(runDtrain(kQuick + "--workers 2 --strategy butterfly"), "unknown --strategy 'butterfly'");
  expectUsage(runDtrain(kQuick + "--workers 2 --backend nccl"), "unknown --backend 'nccl'");
  expectUsage(runDtrain(kQuick + "--workers 2 --allreduce-algo butterfly"),
              "unknown --allreduce-algo 'butterfly'");
  // MPI_Allreduce exists on the mpi backend only.
  expectUsage(runDtrain(kQuick + "--workers 2 --allreduce-algo native"),
              "--allreduce-algo native is not available on the local backend");
}

TEST(ParallelErrors, SingleStrategyWithSeveralWorkers) {
  expectUsage(runDtrain(kQuick + "--workers 2 --strategy single"), "--strategy single");
}

TEST(ParallelErrors, NonPositiveFusionSize) {
  expectUsage(runDtrain(kQuick + "--workers 2 --fusion-mb 0"), "--fusion-mb must be > 0 (got 0)");
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

// Parameter servers, Hogwild!, stragglers and fault injection.
TEST(ParallelErrors, ParameterServerFlags) {
  const std::string ps = kQuick + "--strategy ps --workers 2 ";
  expectUsage(runDtrain(ps + "--servers 0"), "--servers must be in [1, 4096] (got 0)");
  expectUsage(runDtrain(ps + "--consistency eventual"), "unknown --consistency 'eventual'");
  expectUsage(runDtrain(ps + "--staleness 3"), "--staleness applies to --consistency ssp");
  expectUsage(runDtrain(ps + "--consistency ssp --staleness -1"), "--staleness must be >= 0");
  expectUsage(runDtrain(ps + "--backup-workers 2"), "--backup-workers must be in [0, 1]");
  expectUsage(runDtrain(ps + "--consistency async --backup-workers 1"),
              "--backup-workers applies to --consistency sync");
  expectUsage(runDtrain(ps + "--push-every 2"), "--push-every applies to --consistency async");
  expectUsage(runDtrain(ps + "--fetch-every 2"),
              "--fetch-every applies to --consistency async and ssp with --ssp-reads eager");
  expectUsage(runDtrain(ps + "--consistency ssp --ssp-reads lazy --fetch-every 2"),
              "--fetch-every applies to --consistency async and ssp with --ssp-reads eager");
  expectUsage(runDtrain(ps + "--consistency ssp --ssp-reads sometimes"),
              "unknown --ssp-reads 'sometimes' (known: eager, lazy)");
  expectUsage(runDtrain(ps + "--ssp-reads lazy"), "--ssp-reads applies to --consistency ssp");
  expectUsage(runDtrain(ps + "--consistency async --fetch-every 0"), "--fetch-every must be >= 1 (got 0)");
  expectUsage(runDtrain(ps + "--ps-timeout 0"), "--ps-timeout must be > 0 (got 0)");
  expectUsage(runDtrain(ps + "--optimizer lars"), "--optimizer lars needs whole-layer norms");
  expectUsage(runDtrain(ps + "--accumulate 2"), "--accumulate applies to --strategy allreduce");
  expectUsage(runDtrain(ps + "--servers 100000000"), "--servers must be in [1, 4096]");
}

TEST(ParallelErrors, StragglerAndFaultInjectionFlags) {
  const std::string ps = kQuick + "--strategy ps --workers 2 ";
  expectUsage(runDtrain(ps + "--straggler 1"), "--straggler 1: expected INDEX:MS");
  expectUsage(runDtrain(ps + "--straggler a:5"), "--straggler a:5: expected INDEX:MS");
  expectUsage(runDtrain(ps + "--straggler 2:5"), "worker 2 does not exist (workers are 0..1)");
  expectUsage(runDtrain(ps + "--straggler 1:-5"), "the delay must be >= 0 ms");
  expectUsage(runDtrain(ps + "--random-delay -1"), "--random-delay must be >= 0 (got -1)");
  expectUsage(runDtrain(ps + "--kill-worker 0:5"), "worker 0 reports and is never killed");
  expectUsage(runDtrain(ps + "--kill-worker 1:x"), "--kill-worker 1:x: expected INDEX:N");
  expectUsage(runDtrain(ps + "--kill-server 1:5"), "server 1 does not exist (servers are 0..0)");
  expectUsage(runDtrain(kQuick + "--workers 2 --kill-worker 1:5"), "--kill-worker does not apply to --strategy allreduce (only to --strategy ps)");
  expectUsage(runDtrain(ps + "--pause-worker 1"), "--pause-worker 1: expected INDEX:N");
  expectUsage(runDtrain(ps + "--pause-worker 2:5"), "--pause-worker 2:5: worker 2 does not exist (workers are 0..1)");
  expectUsage(runDtrain(ps + "--pause-worker 1:-1"), "--pause-worker 1:-1: the step must be >= 0");
  expectUsage(runDtrain(kQuick + "--workers 2 --pause-worker 1:5"), "--pause-worker does not apply to --strategy allreduce (only to --strategy ps)");
}

TEST(ParallelErrors, HogwildNeedsTheLocalBackend) {
  expectUsage(runDtrain(kQuick + "--strategy hogwild --backend mpi"),
              "--strategy hogwild shares one parameter set between threads of one process");
}

TEST(ParallelErrors, Compression) {
  expectUsage(runDtrain(kQuick + "--workers 2 --compress twobit"),
              "unknown --compress 'twobit' (known: none, fp16, bf16, onebit, signsgd, qsgd, topk, "
              "randomk, powersgd)");
  expectUsage(runDtrain(kQuick + "--workers 2 --strategy ps --compress powersgd"),
              "--compress powersgd does not apply to parameter-server pushes (known there: fp16, "
              "bf16, onebit, signsgd, qsgd, topk)");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress fp16 --compress-collective two-stage"),
              "--compress-collective applies to --compress onebit, signsgd, qsgd or topk (got "
              "--compress fp16)");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress onebit --compress-collective tree"),
              "unknown --compress-collective 'tree' (known: allgather, two-stage)");
  expectUsage(runDtrain(kQuick + "--workers 2 --strategy ps --compress onebit "
                                 "--compress-collective two-stage"),
              "--compress-collective applies to allreduce (ps pushes go to one server)");
  expectUsage(runDtrain(kQuick + "--workers 2 --strategy hogwild --compress topk"),
              "--compress does not apply to --strategy hogwild");
  expectUsage(runDtrain(kQuick + "--compress onebit"), "this run has one worker");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress qsgd --compress-bits 0"),
              "--compress-bits must be in [1, 15] (got 0)");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress topk --compress-ratio 0"),
              "--compress-ratio must be in (0, 1] (got 0)");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress powersgd --compress-rank 0"),
              "--compress-rank must be >= 1 (got 0)");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress powersgd --compress-start-step -1"),
              "--compress-start-step must be >= 0 (got -1)");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress onebit --compress-rank 2"),
              "--compress-rank applies to --compress powersgd (got --compress onebit)");
  expectUsage(runDtrain(kQuick + "--workers 2 --compress-ratio 0.1"),
              "--compress-ratio applies to --compress topk or randomk (got --compress none)");
}
