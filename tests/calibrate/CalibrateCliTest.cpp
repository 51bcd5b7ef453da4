// `dtrain calibrate` as a user runs it: bad flags refused with one line (exit
// 2), and a short real run (mlp, one micro-batch, threads only) writes a
// valid machine file.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "calibrate/MachineFile.h"
#include "cli/CliRunner.h"

namespace dtrain::test {
namespace {

const char* kQuick = "calibrate --micro-batches 1 --quick --max-bytes 65536 --repeats 1 --no-mpi --models mlp";

TEST(CalibrateCli, BadFlagsAreOneLineExit2) {
  const std::string out = " --out " + tempDir() + "/m.json";
  expectError(runDtrain("calibrate --models mlp"), 2, "calibrate needs --out");
  expectError(runDtrain("calibrate --models nope" + out), 2, "nope");
  expectError(runDtrain("calibrate --micro-batches 1,0" + out), 2, "--micro-batches: '0'");
  expectError(runDtrain("calibrate --micro-batches 1,,2" + out), 2, "empty entry");
  expectError(runDtrain("calibrate --precision fp64" + out), 2, "fp64");
  expectError(runDtrain("calibrate --threads 0" + out), 2, "--threads must be >= 1");
  expectError(runDtrain("calibrate --threads abc" + out), 2, "--threads");
  expectError(runDtrain("calibrate --netsim 4" + out), 2, "--netsim needs --rate");
  expectError(runDtrain("calibrate --netsim 4 --rate fast" + out), 2, "--rate");
  expectError(runDtrain("calibrate --rate 1gbit" + out), 2, "--rate applies to --netsim");
  expectError(runDtrain("calibrate --netsim 2 --rate 1gbit --hosts a,b" + out), 2, "exclude");
  expectError(runDtrain("calibrate --max-bytes 1000" + out), 2, "--max-bytes");
}

TEST(CalibrateCli, QuickRunWritesAValidMachineFile) {
  const std::string path = tempDir() + "/machine.json";
  // resnet-20 beside the mlp: not a sequence of layers, so timed whole.
  const CliResult r = runDtrain(std::string(kQuick) + ",resnet-20 --out " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("calibrate: wrote " + path), std::string::npos) << r.err;
  std::ifstream in(path);
  const auto m = nlohmann::json::parse(in);
  EXPECT_NO_THROW(calibrate::checkMachineJson(m));
  EXPECT_EQ(m["format"], "dtrain-machine-1");
  EXPECT_EQ(m["hosts"], 1);
  EXPECT_TRUE(m["links"].contains("same_process"));
  EXPECT_FALSE(m["links"].contains("intra_host"));  // --no-mpi
  for (const char* c : {"allreduce_ring", "allreduce_hier", "allgather_ring", "reduce_scatter_ring",
                        "broadcast"})
    EXPECT_TRUE(m["collectives"]["same_process"].contains(c)) << c;
  // Threads all run on this host: ranks_per_host is the whole group.
  EXPECT_EQ(m["collectives"]["same_process"]["allreduce_hier"]["ranks"], 4);
  EXPECT_EQ(m["collectives"]["same_process"]["allreduce_hier"]["ranks_per_host"], 4);
  const auto& mlp = m["models"]["mlp"];
  EXPECT_EQ(mlp["precision"], "fp32");
  // precision, threads, shared_slowdown, micro_batches: the format's keys
  EXPECT_EQ(mlp.size(), 4u) << mlp.dump();
  // 2 processes a core, each at least as slow as its share (CoreSharing.h).
  EXPECT_GE(mlp["shared_slowdown"].get<double>(), 1.0);
  EXPECT_NE(r.err.find("mlp micro-batch 1, "), std::string::npos) << r.err;
  ASSERT_TRUE(mlp["micro_batches"].contains("1"));
  EXPECT_EQ(mlp["micro_batches"]["1"]["layers"].size(), 6u);  // Flatten, Linear, ReLU, ...
  const auto& resnet = m["models"]["resnet-20"]["micro_batches"]["1"];
  ASSERT_EQ(resnet["layers"].size(), 1u) << resnet.dump();
  EXPECT_EQ(resnet["layers"][0]["name"], "model");
  EXPECT_EQ(resnet["layers"][0]["params"], 272186);
  EXPECT_GT(resnet["layers"][0]["activation_bytes"].get<double>(), 0);
  EXPECT_GT(resnet["backward_s"].get<double>(), 0);
}

// Without --micro-batches: powers of two from 1 up to 256, or up to the first
// size whose forward and backward take over 50 ms.
TEST(CalibrateCli, AutoMicroBatchesDoubleUpToTheCap) {
  const std::string path = tempDir() + "/machine.json";
  std::string cmd = kQuick;
  cmd.erase(cmd.find("--micro-batches 1 "), std::string("--micro-batches 1 ").size());
  const CliResult r = runDtrain(cmd + " --out " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(path);
  const auto sizes = nlohmann::json::parse(in)["models"]["mlp"]["micro_batches"];
  int64_t expected = 1;
  double last = 0;
  for (; expected <= 256; expected *= 2) {
    if (!sizes.contains(std::to_string(expected))) break;
    const auto& t = sizes[std::to_string(expected)];
    last = t["forward_s"].get<double>() + t["backward_s"].get<double>();
  }
  EXPECT_EQ(sizes.size(), static_cast<size_t>(std::log2(expected))) << sizes.dump();
  if (expected <= 256) {
    EXPECT_GT(last, 0.05) << "stopped at " << expected << " before 256 and 50 ms";
  }
}

#ifdef DTRAIN_WITH_MPI
// The processes-on-this-host part: mpirun starts this binary's hidden
// --internal-comm mode, whose rank 0 hands its fits back.
TEST(CalibrateCli, MpiRanksOnThisHostGiveIntraHostFits) {
  const std::string path = tempDir() + "/machine.json";
  std::string cmd = kQuick;
  cmd.erase(cmd.find(" --no-mpi"));
  const CliResult r = runDtrain(cmd + " --out " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(path);
  const auto m = nlohmann::json::parse(in);
  EXPECT_NO_THROW(calibrate::checkMachineJson(m));
  ASSERT_TRUE(m["links"].contains("intra_host")) << m.dump();
  EXPECT_GT(m["links"]["intra_host"]["bytes_per_s"].get<double>(), 0);
  for (const char* c : {"allreduce_ring", "allgather_ring", "reduce_scatter_ring", "broadcast"}) {
    ASSERT_TRUE(m["collectives"]["intra_host"].contains(c)) << c;
    EXPECT_EQ(m["collectives"]["intra_host"][c]["ranks"], 2);
  }
  // Pairs of processes summing after compute, 2 and 4 a core (none on a single core).
  if (std::thread::hardware_concurrency() >= 2) {
    ASSERT_TRUE(m.contains("paired_sum_waits")) << m.dump();
    ASSERT_EQ(m["paired_sum_waits"].size(), 2u);
    EXPECT_EQ(m["paired_sum_waits"][0]["ranks_per_core"], 2);
    EXPECT_EQ(m["paired_sum_waits"][1]["ranks_per_core"], 4);
    for (const auto& w : m["paired_sum_waits"]) EXPECT_GE(w["seconds"].get<double>(), 0);
  }
  // The model timed beside MPI ranks waiting in a sum (CoreSharing.h).
  ASSERT_TRUE(m["models"]["mlp"].contains("waiting_slowdown")) << m.dump();
  EXPECT_GE(m["models"]["mlp"]["waiting_slowdown"].get<double>(), 1.0);
  EXPECT_NE(r.err.find("waiting: "), std::string::npos) << r.err;
}
#endif

// --from: an earlier file's hosts, links and collectives kept, compute and the
// models measured again; models it had and this run did not measure kept too.
TEST(CalibrateCli, FromKeepsTheLinksAndMeasuresTheModelsAgain) {
  const std::string base = tempDir() + "/base.json", out = tempDir() + "/again.json";
  const CliResult first = runDtrain(std::string(kQuick) + " --out " + base);
  ASSERT_EQ(first.code, 0) << first.err;
  std::ifstream in(base);
  auto machine = nlohmann::json::parse(in);
  // Marks only this test can have put there: kept means copied, not measured again.
  machine["links"]["same_process"]["alpha_s"] = 0.125;
  machine["models"]["kept-model"] = machine["models"]["mlp"];
  machine["models"]["mlp"]["shared_slowdown"] = 99.0;
  std::ofstream(base) << machine.dump();

  std::string cmd = kQuick;
  cmd.erase(cmd.find(" --max-bytes 65536"), std::string(" --max-bytes 65536").size());
  cmd.replace(cmd.find("--micro-batches 1 "), std::string("--micro-batches 1 ").size(), "--micro-batches 1,2 ");
  const CliResult r = runDtrain(cmd + " --from " + base + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("keeping the hosts, links and collectives of " + base), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("point-to-point"), std::string::npos) << "no link measured: " << r.err;
  std::ifstream again(out);
  const auto m = nlohmann::json::parse(again);
  EXPECT_NO_THROW(calibrate::checkMachineJson(m));
  EXPECT_EQ(m["links"], machine["links"]);
  EXPECT_EQ(m["collectives"], machine["collectives"]);
  EXPECT_EQ(m["hosts"], machine["hosts"]);
  EXPECT_EQ(m["models"]["kept-model"], machine["models"]["kept-model"]);
  const auto& mlp = m["models"]["mlp"];
  EXPECT_NE(mlp["shared_slowdown"].get<double>(), 99.0);  // measured again
  EXPECT_TRUE(mlp["micro_batches"].contains("2")) << mlp.dump();
}

TEST(CalibrateCli, FromRefusesWhatItWouldNotMeasure) {
  const std::string dir = tempDir(), out = " --out " + dir + "/m.json";
  const std::string bad = dir + "/bad.json", cluster = dir + "/cluster.json";
  std::ofstream(bad) << "{ not json";
  expectError(runDtrain("calibrate --models mlp --from " + dir + "/missing.json" + out), 2, "cannot read");
  expectError(runDtrain("calibrate --models mlp --from " + bad + out), 2, "is not a JSON object");
  std::ofstream(cluster) << R"({"format": "dtrain-machine-1"})";
  expectError(runDtrain("calibrate --models mlp --from " + cluster + out), 2, "--from " + cluster);
  expectError(runDtrain("calibrate --from " + bad + " --netsim 2 --rate 1gbit" + out), 2, "--from keeps FILE's");
  expectError(runDtrain("calibrate --from " + bad + " --samples s.json" + out), 2, "--samples: --from");
  expectError(runDtrain("calibrate --from " + bad + " --devices-per-host 2" + out), 2, "--devices-per-host: --from");
  expectError(runDtrain("calibrate --from " + bad + " --max-bytes 65536" + out), 2, "--max-bytes: --from");
}

TEST(CalibrateCli, UnwritableOutIsExit1AndLeavesNothing) {
  const CliResult r = runDtrain(std::string(kQuick) + " --out /nonexistent-dir/m.json");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("writing machine file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dtrain::test
