// dtrain plan --write-sbatch: examples/slurm/train.sbatch itself (its preemption,
// scancel and lost-node handling) with the plan's counts and configuration. The
// slurm CTest submits a written script to a real SLURM; this checks the text
// wherever dtrain builds.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/CliRunner.h"

using namespace dtrain::test;

namespace {

const std::string kExample = std::string(DTRAIN_SCRIPTS) + "/../examples/slurm/train.sbatch";
const std::string kMachine = std::string(DTRAIN_SCRIPTS) + "/../bench/machines/zen4-2core-netsim4-1gbit.json";

std::string writeSbatch(int hosts, int ranksPerHost) {
  const std::string file = tempDir() + "/job.sbatch";
  const CliResult r = runDtrain("plan --model mlp --global-batch 128 --hosts " + std::to_string(hosts) +
                                " --ranks-per-host " + std::to_string(ranksPerHost) + " --machine " + kMachine +
                                " --top 1 --write-sbatch " + file);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runShell("bash -n " + file).code, 0) << "the written script is not valid bash";
  return slurp(file);
}

// The example's lines from its first #SBATCH on, but those the plan writes its own way.
std::vector<std::string> exampleBody() {
  std::istringstream in(slurp(kExample));
  std::vector<std::string> lines;
  bool body = false;
  for (std::string line; std::getline(in, line);) {
    body = body || line.rfind("#SBATCH", 0) == 0;
    const bool own = line.rfind("#SBATCH --nodes=", 0) == 0 || line.rfind("#SBATCH --ntasks-per-node=", 0) == 0 ||
                     line.rfind("#SBATCH --cpus-per-task=", 0) == 0 || line.rfind("mpi=", 0) == 0 ||
                     line.rfind("config=(", 0) == 0;
    if (body && !own) lines.push_back(line);
  }
  return lines;
}

}  // namespace

TEST(WriteSbatch, IsTheExampleWithThePlansCountsAndConfiguration) {
  const std::string script = writeSbatch(2, 2);
  const std::vector<std::string> body = exampleBody();
  ASSERT_GT(body.size(), 40u) << "cannot read " << kExample;
  size_t at = 0;
  for (const std::string& line : body) {
    const size_t found = script.find(line + "\n", at);
    ASSERT_NE(found, std::string::npos) << "the written script lacks the example's line, in its place: " << line;
    at = found + line.size();
  }
  EXPECT_NE(script.find("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n#SBATCH --cpus-per-task=1\n"),
            std::string::npos) << script;
  EXPECT_NE(script.find("\nmpi=1 "), std::string::npos) << script;
  EXPECT_NE(script.find("\nbackend = \"mpi\"\n"), std::string::npos) << script;
  EXPECT_NE(script.find("\nconfig=(--config \"$ckpt/plan.toml\")"), std::string::npos) << script;
}

TEST(WriteSbatch, ThreadsOfOneProcessAreOneTaskWithoutMpirun) {
  const std::string script = writeSbatch(1, 2);  // one host: the plan keeps its ranks as threads
  EXPECT_NE(script.find("#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=2\n"),
            std::string::npos) << script;
  EXPECT_NE(script.find("\nmpi=0 "), std::string::npos) << script;
  EXPECT_NE(script.find("\nbackend = \"local\"\n"), std::string::npos) << script;
}
