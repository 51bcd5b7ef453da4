#pragma once
// A training run through the dtrain binary (any launcher: the binary itself or
// mpirun) that saves its checkpoint: the parameters and the final JSON line.
#include <nlohmann/json.hpp>

#include <algorithm>
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

}  // namespace dtrain::test
