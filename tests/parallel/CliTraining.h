#pragma once
// A training run through the dtrain binary (any launcher: the binary itself or
// mpirun) that saves its checkpoint: the parameters and the final JSON line.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"

namespace dtrain::test {

struct Finished {
  Params params;
  nlohmann::json line;
};

inline Finished train(const std::string& launcher, const std::string& args, const std::string& dir,
                      const std::string& name) {
  const std::string file = dir + "/" + name + ".safetensors";
  CliResult r = runShell(launcher + args + " --save " + file);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  if (r.code != 0) return {};
  // One JSON line (from the reporter), whatever the number of ranks.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  return {loadModelParams(file), nlohmann::json::parse(r.lastLine())};
}

#ifdef DTRAIN_BIN
// Runs of the dtrain binary in a temporary directory (removed after the test),
// each saving "<dir>/<name>.safetensors".
class CliRuns : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  Finished dtrain(const std::string& args, const std::string& name) {
    return train(std::string(DTRAIN_BIN), args, dir_, name);
  }
  // Parameters and optimizer state, as saved by the run `name`.
  Params saved(const std::string& name) { return loadCheckpointTensors(dir_ + "/" + name + ".safetensors"); }
  std::string dir_;
};
#endif

}  // namespace dtrain::test
