// Machine files: the shipped cluster files read; each kind of mistake refused
// with one line naming the file and the key (the library's UsageError, and
// the CLI's exit code 2).
#include <gtest/gtest.h>

#include <fstream>

#include "cli/CliRunner.h"
#include "core/Error.h"
#include "plan/Collectives.h"
#include "plan/Machine.h"

using namespace dtrain;
using namespace dtrain::plan;

namespace {

const char* kGoodMachine = R"({
  "format": "dtrain-machine-1", "name": "test", "hosts": 4, "devices_per_host": 2,
  "memory_per_device_bytes": 12884901888,
  "compute": {"flops_per_s": {"fp32": 1.0e11}, "memory_bytes_per_s": 2.0e10},
  "links": {"same_process": {"alpha_s": 2e-6, "bytes_per_s": 8e9},
            "inter_host": {"alpha_s": 2e-4, "bytes_per_s": 1.2e7, "burst_bytes": 16384}},
  "collectives": {"inter_host": {"allreduce_ring": {"ranks": 4, "ranks_per_host": 1, "alpha_s": 1e-3, "bytes_per_s": 6e6}}},
  "models": {"gpt-small": {"precision": "fp32", "threads": 1, "micro_batches": {"8": {
      "forward_s": 0.012, "backward_s": 0.025, "update_s": 0.004,
      "layers": [{"name": "blocks.0", "params": 123, "forward_s": 0.001, "backward_s": 0.002, "activation_bytes": 456}]}}}}
})";

// kGoodMachine with `from` replaced by `to`.
std::string edited(const std::string& from, const std::string& to) {
  std::string s = kGoodMachine;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

std::string refusal(const std::string& text) {
  try {
    parseMachine(text, "m.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(PlanMachine, ReadsEverySection) {
  const Machine m = parseMachine(kGoodMachine, "m.json");
  EXPECT_EQ(m.hosts.value_or(0), 4);
  EXPECT_EQ(m.devicesPerHost, 2);
  EXPECT_DOUBLE_EQ(m.flops("fp32"), 1e11);
  EXPECT_DOUBLE_EQ(m.flops("bf16"), 1e11);  // falls back to fp32
  EXPECT_DOUBLE_EQ(m.link(LinkKind::InterHost).bytesPerS, 1.2e7);
  EXPECT_DOUBLE_EQ(m.link(LinkKind::IntraHost).bytesPerS, 1.2e7);  // no intra_host: the next slower
  EXPECT_DOUBLE_EQ(m.link(LinkKind::InterHost).burstBytes, 16384);
  EXPECT_DOUBLE_EQ(m.link(LinkKind::SameProcess).burstBytes, 0);  // a real link has none
  ASSERT_NE(m.collective(LinkKind::InterHost, "allreduce_ring"), nullptr);
  EXPECT_EQ(m.collective(LinkKind::InterHost, "allreduce_ring")->ranks, 4);
  const auto& cal = m.models.at("gpt-small").microBatches.at(8);
  EXPECT_DOUBLE_EQ(cal.backwardS, 0.025);
  ASSERT_EQ(cal.layers.size(), 1u);
  EXPECT_EQ(cal.layers[0].activationBytes, 456);
}

// A micro-batch's time is a fixed part plus a part per sample: a size between
// two measured ones is read off the line between them, layer by layer; one past
// the largest in proportion to it; the update (per step) as measured.
TEST(PlanMachine, ModelTimesReadBetweenMeasuredSizes) {
  ModelCalibration cal;
  auto time = [](double f, double b, double u) {
    ModelTime t{.forwardS = f, .backwardS = b, .updateS = u, .layers = {}};
    t.layers.push_back({.name = "fc1", .forwardS = f / 2, .backwardS = b / 2});
    t.layers.push_back({.name = "fc2", .forwardS = f / 2, .backwardS = b / 2});
    return t;
  };
  EXPECT_FALSE(cal.at(8).has_value());
  cal.microBatches[8] = time(1.0, 2.0, 0.5);
  cal.microBatches[32] = time(2.5, 5.0, 0.7);
  const ModelTime mid = cal.at(16).value();  // a third of the way from 8 to 32
  EXPECT_DOUBLE_EQ(mid.forwardS, 1.5);
  EXPECT_DOUBLE_EQ(mid.backwardS, 3.0);
  EXPECT_DOUBLE_EQ(mid.layers[1].backwardS, 1.5);
  EXPECT_NEAR(mid.updateS, 0.5 + 0.2 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(cal.at(32)->forwardS, 2.5);
  const ModelTime past = cal.at(64).value();
  EXPECT_DOUBLE_EQ(past.forwardS, 5.0);
  EXPECT_DOUBLE_EQ(past.layers[0].backwardS, 5.0);
  EXPECT_DOUBLE_EQ(past.updateS, 0.7);
  EXPECT_DOUBLE_EQ(cal.at(2)->forwardS, 0.25);  // below the smallest: in proportion
}

TEST(PlanMachine, PairedSumWaitsReadOnTheLineBetweenTheMeasuredPoints) {
  const Machine m = parseMachine(edited("\"hosts\": 4,", "\"hosts\": 4, \"paired_sum_waits\": "
                                        "[{\"ranks_per_core\": 2, \"seconds\": 0.001}, "
                                        "{\"ranks_per_core\": 4, \"seconds\": 0.003}],"),
                                 "m.json");
  ASSERT_EQ(m.pairedSumWaits.size(), 2u);
  EXPECT_DOUBLE_EQ(m.pairedSumWaitS(1), 0);       // a core each: no wait
  EXPECT_DOUBLE_EQ(m.pairedSumWaitS(0.5), 0);
  EXPECT_DOUBLE_EQ(m.pairedSumWaitS(1.5), 0.0005);  // from none at 1 a core
  EXPECT_DOUBLE_EQ(m.pairedSumWaitS(2), 0.001);
  EXPECT_DOUBLE_EQ(m.pairedSumWaitS(3), 0.002);
  EXPECT_DOUBLE_EQ(m.pairedSumWaitS(4), 0.003);
  EXPECT_DOUBLE_EQ(m.pairedSumWaitS(6), 0.005);   // beyond: the last two points' line
  EXPECT_DOUBLE_EQ(parseMachine(kGoodMachine, "m.json").pairedSumWaitS(4), 0);  // not measured
  const std::pair<std::string, std::string> cases[] = {
      {edited("\"hosts\": 4,", "\"hosts\": 4, \"paired_sum_waits\": [{\"ranks_per_core\": 1, \"seconds\": 0.001}],"),
       "paired_sum_waits[0].ranks_per_core: must be above 1"},
      {edited("\"hosts\": 4,", "\"hosts\": 4, \"paired_sum_waits\": [{\"ranks_per_core\": 4, \"seconds\": 0.003}, "
                                "{\"ranks_per_core\": 2, \"seconds\": 0.001}],"),
       "paired_sum_waits[1].ranks_per_core: must increase"},
      {edited("\"hosts\": 4,", "\"hosts\": 4, \"paired_sum_waits\": [{\"ranks_per_core\": 2, \"seconds\": -1}],"),
       "paired_sum_waits[0].seconds: must be >= 0"},
      {edited("\"hosts\": 4,", "\"hosts\": 4, \"paired_sum_waits\": [{\"ranks\": 2, \"seconds\": 0}],"),
       "paired_sum_waits[0].ranks: unknown key"},
      {edited("\"hosts\": 4,", "\"hosts\": 4, \"paired_sum_waits\": 0.001,"), "paired_sum_waits: must be an array"}};
  for (const auto& [text, needle] : cases) {
    const std::string why = refusal(text);
    EXPECT_NE(why.find(needle), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
}

TEST(PlanMachine, ShippedClusterFilesRead) {
  for (const char* name : {"selene-a100.json", "dgx2-v100.json", "example-cpu.json"}) {
    const Machine m = readMachine(std::string(DTRAIN_PLAN_CLUSTERS) + "/" + name);
    EXPECT_GT(m.flops("bf16"), 0) << name;
    EXPECT_GT(m.memoryPerDeviceBytes, 0) << name;
  }
  const Machine selene = readMachine(std::string(DTRAIN_PLAN_CLUSTERS) + "/selene-a100.json");
  EXPECT_EQ(selene.devicesPerHost, 8);
  EXPECT_DOUBLE_EQ(selene.flops("bf16"), 312e12);
}

TEST(PlanMachine, RefusesMistakesInOneLineNamingTheKey) {
  const std::pair<std::string, std::string> cases[] = {
      {edited("\"hosts\"", "\"hostz\""), "m.json: hostz: unknown key"},
      {edited("\"alpha_s\": 2e-4", "\"alpha_s\": \"fast\""), "links.inter_host.alpha_s: must be a number"},
      {edited("\"bytes_per_s\": 1.2e7", "\"bytes_per_s\": -5"), "links.inter_host.bytes_per_s: must be > 0"},
      {edited("dtrain-machine-1", "dtrain-machine-0"), "format: is \"dtrain-machine-0\", expected \"dtrain-machine-1\""},
      {edited("\"fp32\": 1.0e11", "\"fp64\": 1.0e11"), "compute.flops_per_s.fp64: unknown key"},
      {edited("\"devices_per_host\": 2", "\"devices_per_host\": 2.5"), "devices_per_host: must be an integer"},
      {edited("\"8\": {", "\"eight\": {"), "micro_batches.eight: the key must be a micro-batch size"},
      {edited("\"ranks\": 4", "\"rank\": 4"), "allreduce_ring.rank: unknown key"},
      {edited("\"burst_bytes\": 16384", "\"burst_bytes\": -1"), "links.inter_host.burst_bytes: must be >= 0"},
      {edited("\"threads\": 1,", "\"threads\": 1, \"shared_slowdown\": 0.9,"),
       "models.gpt-small.shared_slowdown: must be at least 1"},
      {edited("\"threads\": 1,", "\"threads\": 1, \"waiting_slowdown\": 0.5,"),
       "models.gpt-small.waiting_slowdown: must be at least 1"},
      {"{\"format\": ", "not JSON"}};
  for (const auto& [text, needle] : cases) {
    const std::string why = refusal(text);
    EXPECT_NE(why.find(needle), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  try {
    readMachine("/nonexistent/machine.json");
    FAIL() << "a missing file was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/machine.json: cannot be read"), std::string::npos);
  }
}

TEST(PlanMachine, CliRefusesABadMachineFileWithExitCode2) {
  const std::string dir = test::tempDir();
  const std::string config = dir + "/run.toml", machine = dir + "/machine.json";
  std::ofstream(config) << "[model]\nname = \"mlp\"\n[data]\nname = \"synthetic\"\n";
  std::ofstream(machine) << edited("\"bytes_per_s\": 1.2e7", "\"bytes_per_s\": -5");
  test::expectError(test::runDtrain("simulate --config " + config + " --machine " + machine), 2,
                    "links.inter_host.bytes_per_s: must be > 0");
  test::expectError(test::runDtrain("simulate --config " + config + " --machine " + dir + "/none.json"), 2,
                    "none.json: cannot be read");
  test::expectError(test::runDtrain("plan --model mlp --global-batch 8 --machine " + machine), 2,
                    "must be > 0");
  // A good file: one JSON line with the prediction.
  std::ofstream(machine, std::ios::trunc) << kGoodMachine;
  const auto ok = test::runDtrain("simulate --config " + config + " --machine " + machine);
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.lastLine().find("\"samples_per_s\""), std::string::npos) << ok.out;
}

TEST(PlanMachine, ACollectivesSamplesAreReadBetweenTheMeasuredSizes) {
  // Recursive halving as measured on emulated links: 256 KiB costs more than its line.
  const std::string text = edited(
      "\"collectives\": {\"inter_host\": {",
      "\"collectives\": {\"inter_host\": {\"allreduce_rhd\": {\"ranks\": 4, \"ranks_per_host\": 1, "
      "\"alpha_s\": 1e-4, \"bytes_per_s\": 8e7, \"samples\": [[65536, 0.0008], [262144, 0.0055], [1048576, 0.013]]},");
  const Machine m = parseMachine(text, "m.json");
  const CollectiveFit* rhd = m.collective(LinkKind::InterHost, "allreduce_rhd");
  ASSERT_NE(rhd, nullptr);
  EXPECT_DOUBLE_EQ(rhd->time(262144), 0.0055);                                   // a measured size
  EXPECT_DOUBLE_EQ(rhd->time(163840), 0.0008 + 0.5 * (0.0055 - 0.0008));          // halfway between two
  EXPECT_DOUBLE_EQ(rhd->time(61440), 0.0008 - 4096 / 8e7);                         // below: the fit's slope
  EXPECT_DOUBLE_EQ(rhd->time(4096), 1e-4);                                         // down to its latency
  EXPECT_DOUBLE_EQ(rhd->time(4194304), 1e-4 + 4194304 / 8e7);                      // above: the fit
  EXPECT_DOUBLE_EQ(m.collective(LinkKind::InterHost, "allreduce_ring")->time(65536), 1e-3 + 65536 / 6e6);  // none

  // The simulator takes the fit of the algorithm the trainer's auto runs:
  // recursive halving for 64 KiB over 4 hosts, 1 rank each; the ring's above.
  const Placement spread{4, 1, false};
  const RankGroup four{4, 4, 1, 1};
  EXPECT_DOUBLE_EQ(allreduceTime(m, spread, four, 65536, "auto"), 0.0008);
  EXPECT_DOUBLE_EQ(allreduceTime(m, spread, four, 262144, "auto"), 1e-3 + 262144 / 6e6);
  EXPECT_DOUBLE_EQ(allreduceTime(m, spread, four, 262144, "rhd"), 0.0055);
  // An algorithm without its own fit (no tree measured here, MPI's native never): the ring's.
  EXPECT_DOUBLE_EQ(allreduceTime(m, spread, four, 4096, "auto"), 1e-3 + 4096 / 6e6);
  EXPECT_DOUBLE_EQ(allreduceTime(m, spread, four, 262144, "native"), 1e-3 + 262144 / 6e6);

  for (const auto& [samples, needle] :
       {std::pair<std::string, std::string>{"[[65536, 0.001], [65536, 0.002]]", "samples[1]: sizes must increase"},
        {"[[65536, -1]]", "samples[0]: must be [bytes, seconds], both > 0"},
        {"[65536, 0.001]", "samples[0]: must be [bytes, seconds]"},
        {"{}", "samples: must be an array"}}) {
    const std::string why = refusal(edited("\"bytes_per_s\": 6e6}", "\"bytes_per_s\": 6e6, \"samples\": " + samples + "}"));
    EXPECT_NE(why.find("allreduce_ring." + needle), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
}
