// `mpirun -np N dtrain train --strategy fedavg --backend mpi`: rank 0 serves,
// ranks 1..N-1 host the clients; every rank applies the same aggregate, so the
// run ends where the simulated one does (the same losses, to the last bit),
// with secure aggregation too (its masks cancel exactly whatever the keys).
#include <nlohmann/json.hpp>

#include <set>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"

namespace dtrain::test {
namespace {

#ifdef DTRAIN_MPIEXEC
const std::string kFed =
    " train --strategy fedavg --model mlp --dataset synthetic --synthetic-size 600 --progress off "
    "--lr 0.1 --clients 10 --client-fraction 0.5 --rounds 3 ";

void expectSameAsSimulated(const std::string& extra, int processes,
                           const std::string& mpiOnly = "") {
  auto sim = runShell(std::string(DTRAIN_BIN) + kFed + extra);
  ASSERT_EQ(sim.code, 0) << sim.err;
  auto mpi = runShell(mpirun(processes) + kFed + extra + " --backend mpi " + mpiOnly);
  ASSERT_EQ(mpi.code, 0) << mpi.err;
  const auto a = nlohmann::json::parse(sim.lastLine()), b = nlohmann::json::parse(mpi.lastLine());
  EXPECT_EQ(b.at("backend"), "mpi");
  EXPECT_EQ(b.at("client_hosts"), processes - 1);
  for (const char* key : {"test_loss", "test_accuracy", "train_loss", "bytes_up", "bytes_down"})
    EXPECT_EQ(b.at(key), a.at(key)) << key << " " << extra;
}

TEST(FederatedMpi, ClientsOnTwoHostsEndAsTheSimulatedRun) { expectSameAsSimulated("", 3); }
TEST(FederatedMpi, SecureAggregationWithDropoutsAcrossProcesses) {
  expectSameAsSimulated("--secure-aggregation --client-dropout 0.2", 3);
}
// The wall clock's real protocol (the model sent to each host, one message per
// update back, the aggregate on the server only) without a deadline: every
// update is waited for, so the run is the simulated one to the last bit.
TEST(FederatedMpi, WallClockRoundsWithoutDeadlineEndAsTheSimulatedRun) {
  expectSameAsSimulated("", 3, "--deadline-clock wall");
  expectSameAsSimulated("--secure-aggregation --client-dropout 0.2", 4, "--deadline-clock wall");
}

// A deadline no network can meet (a microsecond: sending the model alone takes
// longer): every selected client is late in every round, none is aggregated,
// and the hosts still busy with a dropped round are drained before the end.
TEST(FederatedMpi, WallClockDeadlineLeavesOutLateUpdates) {
  auto r = runShell(mpirun(3) + kFed + " --backend mpi --deadline-clock wall --round-deadline-s 1e-6");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.lastLine());
  EXPECT_EQ(out.at("deadline_clock"), "wall");
  EXPECT_EQ(out.at("clients_late"), 15);  // 5 selected x 3 rounds
  EXPECT_EQ(out.at("bytes_up"), 0);
  EXPECT_EQ(out.at("train_loss"), 0.0);
}

// --timeline, --save and memory_per_rank across processes: rank 0 writes every
// rank's spans (its rounds, the hosts' clients) and the global model, and the
// result line has one memory record per rank; on both clocks.
TEST(FederatedMpi, TimelineSaveAndMemoryPerRank) {
  for (const std::string clock : {"simulated", "wall"}) {
    const std::string dir = tempDir();
    auto r = runShell(mpirun(3) + kFed + " --backend mpi --deadline-clock " + clock +
                      " --timeline " + dir + "/t.json --save " + dir + "/g.safetensors");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto out = nlohmann::json::parse(r.lastLine());
    EXPECT_EQ(out.at("memory_per_rank").size(), 3u) << clock;
    EXPECT_GT(out.at("parameters").get<int64_t>(), 0);
    std::set<int> clientPids, roundPids;
    const auto doc = nlohmann::json::parse(slurp(dir + "/t.json"));
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("ph") != "X") continue;
      const std::string name = e.at("name");
      if (name == "round") roundPids.insert(e.at("pid").get<int>());
      if (name.rfind("client ", 0) == 0) clientPids.insert(e.at("pid").get<int>());
    }
    // (On the simulated clock every rank runs the rounds and applies the aggregate.)
    EXPECT_EQ(roundPids, (clock == "wall" ? std::set<int>{0} : std::set<int>{0, 1, 2})) << clock;
    EXPECT_EQ(clientPids, (std::set<int>{1, 2})) << clock;
    auto loaded = runDtrain("train --model mlp --dataset synthetic --synthetic-size 600 "
                            "--progress off --max-steps 1 --load " + dir + "/g.safetensors");
    EXPECT_EQ(loaded.code, 0) << loaded.err;
  }
}

TEST(FederatedMpi, OneProcessIsAUsageError) {
  auto r = runShell(mpirun(1) + kFed + " --backend mpi");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("at least 2 processes"), std::string::npos) << r.err;
}
#endif

}  // namespace
}  // namespace dtrain::test
