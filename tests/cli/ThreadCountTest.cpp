// --threads auto, the default: OMP_NUM_THREADS when set, else this machine's
// usable cores shared by the ranks running on it (at least 1); the result line
// says how many ran. The suite runs with OMP_NUM_THREADS=1 (tests/CMakeLists.txt):
// these tests unset or set it themselves.
#include <sched.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"

namespace dtrain::test {
namespace {

const std::string kThreadsRun =
    " train --model mlp --dataset synthetic --synthetic-size 256 --batch-size 16 --max-steps 2 --progress off ";

int cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  return std::max(1, CPU_COUNT(&set));
}

// The "threads" of the result line (stdout's last line).
int threadsIn(const std::string& out) {
  std::string text = out;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return nlohmann::json::parse(text.substr(text.rfind('\n') + 1)).at("threads").get<int>();
}

int threadsOf(const std::string& env, const std::string& flags) {
  const CliResult r = runShell("env " + env + " " + std::string(DTRAIN_BIN) + kThreadsRun + flags);
  EXPECT_EQ(r.code, 0) << r.err;
  return threadsIn(r.out);
}

TEST(ThreadCount, AutoTakesTheCoresSharedByTheRanks) {
  EXPECT_EQ(threadsOf("-u OMP_NUM_THREADS", ""), cores());
  EXPECT_EQ(threadsOf("-u OMP_NUM_THREADS", "--workers 2"), std::max(1, cores() / 2));
  EXPECT_EQ(threadsOf("-u OMP_NUM_THREADS", "--threads auto --workers 4"), std::max(1, cores() / 4));
}

TEST(ThreadCount, OmpNumThreadsAndAGivenCountWin) {
  EXPECT_EQ(threadsOf("OMP_NUM_THREADS=3", ""), 3);
  EXPECT_EQ(threadsOf("OMP_NUM_THREADS=3", "--threads 1"), 1);
  // (libgomp, loaded with oneDNN, prints its own warning about the variable first.)
  const CliResult bad = runShell("env OMP_NUM_THREADS=many " + std::string(DTRAIN_BIN) + kThreadsRun);
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("dtrain: error: --threads auto: OMP_NUM_THREADS must be a whole number from 1 to "
                         "1024 (got 'many')"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out, "");
  expectError(runDtrain(kThreadsRun + "--threads many"), 2, "--threads");
}

// Inside a SLURM job with --cpus-per-task (the variables sbatch and srun export):
// auto takes the task's CPUs, at most the usable cores, whatever the ranks on
// the machine; a count asked for above them is one line, exit 2.
TEST(ThreadCount, ASlurmTaskGetsItsCpusAndNoMore) {
  const std::string job = "-u OMP_NUM_THREADS SLURM_JOB_ID=7 SLURM_CPUS_PER_TASK=";
  EXPECT_EQ(threadsOf(job + "1", ""), 1);
  EXPECT_EQ(threadsOf(job + "1024", ""), cores());
  EXPECT_EQ(threadsOf(job + "1", "--threads 1"), 1);
  // The local backend's workers are threads of one task: they share its CPUs.
  EXPECT_EQ(threadsOf(job + "2", "--workers 2"), std::max(1, std::min(2, cores()) / 2));
  expectError(runShell("env " + job + "2 " + std::string(DTRAIN_BIN) + kThreadsRun + "--workers 2 --threads 2"), 2,
              "--threads 2 x 2 workers: this SLURM task was given 2 CPUs");
  // Outside a job the variable means nothing.
  EXPECT_EQ(threadsOf("-u OMP_NUM_THREADS -u SLURM_JOB_ID SLURM_CPUS_PER_TASK=1", ""), cores());
  const CliResult tooMany = runShell("env " + job + "1 " + std::string(DTRAIN_BIN) + kThreadsRun + "--threads 2");
  EXPECT_EQ(tooMany.code, 2) << tooMany.err;
  EXPECT_NE(tooMany.err.find("dtrain: error: --threads 2: this SLURM task was given 1 CPU (SLURM_CPUS_PER_TASK)"),
            std::string::npos) << tooMany.err;
  const CliResult omp = runShell("env SLURM_JOB_ID=7 SLURM_CPUS_PER_TASK=2 OMP_NUM_THREADS=3 " +
                                 std::string(DTRAIN_BIN) + kThreadsRun);
  EXPECT_EQ(omp.code, 2) << omp.err;
  EXPECT_NE(omp.err.find("OMP_NUM_THREADS 3: this SLURM task was given 2 CPUs"), std::string::npos) << omp.err;
}

// OpenMP's idle threads sleep by default (spinning ones collapse beside a busy
// process); the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
TEST(ThreadCount, OpenMpWaitsPassivelyUnlessTheUserChose) {
  auto policy = [](const std::string& env) {
    const CliResult r = runShell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_NUM_THREADS=2 " + env + " " +
                                 std::string(DTRAIN_BIN) + kThreadsRun);
    EXPECT_EQ(r.code, 0) << r.err;
    std::string text = r.out;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return nlohmann::json::parse(text.substr(text.rfind('\n') + 1)).at("omp_wait_policy").get<std::string>();
  };
  EXPECT_EQ(policy(""), "passive");
  EXPECT_EQ(policy("OMP_WAIT_POLICY=active"), "active");
  EXPECT_EQ(policy("GOMP_SPINCOUNT=1000"), "GOMP_SPINCOUNT=1000");
}

TEST(ThreadCount, ConfigFilesTakeAutoOrACount) {
  const CliResult printed = runDtrain(kThreadsRun + "--print-config");
  ASSERT_EQ(printed.code, 0) << printed.err;
  EXPECT_NE(printed.out.find("threads = \"auto\""), std::string::npos) << printed.out;
  const std::string path = tempDir() + "/threads.toml";
  for (const std::string& value : {"\"auto\"", "2"}) {
    std::ofstream(path) << "[training]\nthreads = " << value << "\n";
    const CliResult r = runShell("env OMP_NUM_THREADS=1 " + std::string(DTRAIN_BIN) + kThreadsRun + "--config " + path);
    ASSERT_EQ(r.code, 0) << value << ": " << r.err;
    EXPECT_EQ(threadsIn(r.out), value == "2" ? 2 : 1);
  }
  std::ofstream(path) << "[training]\nthreads = \"many\"\n";
  expectError(runDtrain(kThreadsRun + "--config " + path), 2, "threads");
}

}  // namespace
}  // namespace dtrain::test
