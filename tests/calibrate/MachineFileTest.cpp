#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "calibrate/MachineFile.h"
#include "core/Error.h"

namespace dtrain::calibrate {
namespace {

nlohmann::json validMachine() {
  ModelTimes t;
  t.forwardS = 1e-3;
  t.backwardS = 2e-3;
  t.updateS = 1e-4;
  t.layers = {{"0", 0, 1e-5, 0, 0}, {"1", 200960, 5e-4, 1e-3, 4096}};
  ProbeResult probe;
  probe.pointToPoint = {2e-6, 8e9};
  probe.collectives.push_back({"allreduce_ring", 2, 2, {1e-5, 4e9}, {}});
  nlohmann::json m = {{"format", kMachineFormat}, {"name", "test"}, {"hosts", 1},
                      {"devices_per_host", 2}, {"memory_per_device_bytes", 1 << 30}};
  m["compute"] = computeJson({1e11, 2e11, 2e10});
  m["links"]["same_process"] = linkJson(probe.pointToPoint);
  m["collectives"]["same_process"] = collectivesJson(probe);
  m["models"]["mlp"] = {{"precision", "fp32"}, {"threads", 1}};
  m["models"]["mlp"]["micro_batches"]["8"] = modelTimesJson(t);
  return m;
}

std::string errorOf(const nlohmann::json& m) {
  try {
    checkMachineJson(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MachineFile, ValidFileHasEveryKeyAndPasses) {
  const nlohmann::json m = validMachine();
  EXPECT_EQ(errorOf(m), "");
  EXPECT_EQ(m["compute"]["flops_per_s"]["bf16"], 2e11);
  EXPECT_EQ(m["links"]["same_process"]["bytes_per_s"], 8e9);
  EXPECT_EQ(m["collectives"]["same_process"]["allreduce_ring"]["ranks"], 2);
  const auto& layer = m["models"]["mlp"]["micro_batches"]["8"]["layers"][1];
  EXPECT_EQ(layer["params"], 200960);
  EXPECT_EQ(layer["activation_bytes"], 4096);
}

TEST(MachineFile, RefusesWhatTheReadersWouldMisread) {
  auto m = validMachine();
  m["hostz"] = 3;
  EXPECT_NE(errorOf(m).find("unknown key 'hostz'"), std::string::npos);
  m = validMachine();
  m["format"] = "dtrain-machine-0";
  EXPECT_NE(errorOf(m).find("format"), std::string::npos);
  m = validMachine();
  m["compute"]["flops_per_s"].erase("fp32");
  EXPECT_NE(errorOf(m).find("missing compute.flops_per_s.fp32"), std::string::npos);
  m = validMachine();
  m["links"]["same_process"]["alpha_s"] = -1e-6;
  EXPECT_NE(errorOf(m).find("links.same_process.alpha_s must be a positive"), std::string::npos);
  m = validMachine();
  m["collectives"]["same_process"]["allreduce_ring"]["bytes_per_s"] = NAN;
  EXPECT_NE(errorOf(m).find("allreduce_ring.bytes_per_s"), std::string::npos);
  m = validMachine();
  m["models"]["mlp"]["micro_batches"]["8"]["update_s"] = 0;
  EXPECT_NE(errorOf(m).find("micro_batches.8.update_s"), std::string::npos);
  m = validMachine();
  m["models"]["mlp"]["micro_batches"]["8"]["layers"][0]["activation_bytes"] = -1;
  EXPECT_NE(errorOf(m).find("layers[0].activation_bytes"), std::string::npos);
}

TEST(MachineFile, EmulatedHostsKeys) {
  // calibrate --netsim: the hosts share this machine's cores; every file: sends
  // do not overlap compute.
  auto m = validMachine();
  m["shared_cores"] = 2;
  m["async_sends"] = false;
  EXPECT_EQ(errorOf(m), "");
  m["shared_cores"] = 0;
  EXPECT_NE(errorOf(m).find("shared_cores"), std::string::npos);
  // The emulated link's kernel work a byte: measured, so never negative.
  m = validMachine();
  m["links"]["same_process"]["core_s_per_byte"] = 2e-9;
  EXPECT_EQ(errorOf(m), "");
  m["links"]["same_process"]["core_s_per_byte"] = -2e-9;
  EXPECT_NE(errorOf(m).find("core_s_per_byte"), std::string::npos);
}

TEST(MachineFile, WrittenFileParsesBackEqual) {
  const std::string path = testing::TempDir() + "/machine-test.json";
  const auto m = validMachine();
  writeMachineFile(m, path);
  std::ifstream in(path);
  const auto back = nlohmann::json::parse(in);
  EXPECT_EQ(back, m);
  EXPECT_EQ(errorOf(back), "");
  // An invalid machine is not written: the old file stays.
  auto bad = m;
  bad["links"]["same_process"]["bytes_per_s"] = 0;
  EXPECT_THROW(writeMachineFile(bad, path), Error);
  std::ifstream again(path);
  EXPECT_EQ(nlohmann::json::parse(again), m);
}

}  // namespace
}  // namespace dtrain::calibrate
