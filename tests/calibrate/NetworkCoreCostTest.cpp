// The emulated network's cost on the cores: the arithmetic of the probe's
// lost work and of the ranks' streaming logs, and the streaming ranks under
// mpirun on this host (paused while the probe measures alone).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "calibrate/NetworkCoreCost.h"
#include "cli/CliRunner.h"

namespace dtrain::calibrate {
namespace {

TEST(NetworkCoreCost, BytesBetweenReadEachLogBetweenItsPoints) {
  // Rank 0 sent 1 MB at t = 1 and 2 MB at t = 3; rank 1 4 MB at t = 2.
  const std::vector<StreamLog> logs{{{0, 0}, {1, 1e6}, {3, 2e6}}, {{0, 0}, {2, 4e6}}};
  EXPECT_NEAR(bytesBetween(logs, 1, 3), 1e6 + 2e6, 1e-6);      // rank 1: 2e6 at 1 to 4e6 at 2 and on
  EXPECT_NEAR(bytesBetween(logs, 0.5, 2), 1e6 + 3e6, 1e-6);    // 0.5e6 to 1.5e6, 1e6 to 4e6
  EXPECT_NEAR(bytesBetween(logs, 5, 6), 0, 1e-9);               // after both logs end
  EXPECT_NEAR(bytesBetween({}, 0, 1), 0, 1e-9);
}

TEST(NetworkCoreCost, LostCoreSecondsOverTheBytesSent) {
  // 2 threads did 1000 units in 1 s alone (500 a core second); beside the
  // traffic, 600 in 1 s: 0.8 core s lost over 4e8 bytes, 2 ns a byte.
  ProbePair p;
  p.aloneWork = 1000;
  p.aloneS = 1;
  p.t0 = 10;
  p.t1 = 11;
  p.busyWork = 600;
  EXPECT_NEAR(coreSecondsPerByte(p, 2, 4e8), 2e-9, 1e-15);
  // More work beside the traffic than alone (noise): nothing lost, not negative.
  p.busyWork = 1100;
  EXPECT_EQ(coreSecondsPerByte(p, 2, 4e8), 0);
  // Nothing sent or nothing measured: 0, not a division by zero.
  p.busyWork = 600;
  EXPECT_EQ(coreSecondsPerByte(p, 2, 0), 0);
  p.aloneWork = 0;
  EXPECT_EQ(coreSecondsPerByte(p, 2, 4e8), 0);
}

TEST(NetworkCoreCost, ProbeCountsWork) {
  EXPECT_GT(computeProbe(2, 0.05), 0);
}

#ifdef DTRAIN_WITH_MPI
TEST(NetworkCoreCost, StreamingRanksPauseForTheProbeAloneAndStopWhenAsked) {
  const std::string file = test::tempDir() + "/stream";
  std::atomic<bool> done{false};
  test::CliResult ranks;
  std::thread mpirun([&] {
    ranks = test::runShell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe "
                           "--bind-to none -np 2 " DTRAIN_BIN " calibrate --internal-stream " + file);
    done = true;
  });
  const auto pairs = probeBesideStreams(file, 1, 0.1, 2, 120, [&] { return done.load(); });
  mpirun.join();
  ASSERT_EQ(ranks.code, 0) << ranks.err;
  ASSERT_EQ(pairs.size(), 2u);
  const auto logs = readStreamLogs(file, 2);
  ASSERT_EQ(logs.size(), 2u);
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_GT(pairs[i].aloneWork, 0);
    EXPECT_GT(pairs[i].busyWork, 0);
    EXPECT_GT(bytesBetween(logs, pairs[i].t0, pairs[i].t1), 0) << "pair " << i;
    // While paused (the probe alone, after a 250 ms drain) nothing moves: at
    // most a message a rank that a starved rank was still finishing (streaming,
    // these ranks send hundreds of MB in as long).
    EXPECT_LE(bytesBetween(logs, pairs[i].aloneT0, pairs[i].aloneT0 + pairs[i].aloneS), 2 * 1048576.0)
        << "pair " << i;
    EXPECT_TRUE(std::isfinite(coreSecondsPerByte(pairs[i], 1, bytesBetween(logs, pairs[i].t0, pairs[i].t1))));
  }
  // The ranks' logs and the markers are gone.
  EXPECT_FALSE(std::ifstream(file + ".0").good());
  EXPECT_FALSE(std::ifstream(file + ".started").good());
}
#endif

}  // namespace
}  // namespace dtrain::calibrate
