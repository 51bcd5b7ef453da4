// A clean stop (issue 32): on SIGINT, SIGTERM or SIGUSR1 every rank finishes the step,
// the reporter writes a checkpoint into --checkpoint-dir (or --save), says where
// in one line, and the run exits 128 + the signal; --resume auto then ends
// bitwise where an uninterrupted run does. DTRAIN_STOP_AT_STEP=k raises SIGINT
// in the reporter's process after step k (core/StopSignal.h), through the real
// handler: under mpirun only rank 0 gets it, so the ranks must agree to stop.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"

extern char** environ;

namespace dtrain::test {
namespace {

const std::string kStopRun =
    " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 --lr 0.05 "
    "--momentum 0.9 --seed 5 --progress off --batch-size 16 ";

std::vector<std::string> stopNames(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// `prefix` runs dtrain (with flags after it): stopped at step 7 of 20, resumed,
// the final checkpoint byte for byte an uninterrupted run's.
void expectStopAndResume(const std::string& prefix, const std::string& flags, const std::string& what) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  auto straight = runShell(prefix + kStopRun + flags + " --max-steps 20 --save " + dir + "/straight.safetensors");
  ASSERT_EQ(straight.code, 0) << what << straight.err;
  auto stopped = runShell("DTRAIN_STOP_AT_STEP=7 " + prefix + kStopRun + flags +
                          " --max-steps 20 --checkpoint-dir " + ckpt + " --save " + dir + "/unused.safetensors");
  EXPECT_EQ(stopped.code, 130) << what << stopped.err;
  EXPECT_NE(stopped.err.find("dtrain: stopped by SIGINT after step 7: checkpoint " + ckpt +
                             "/step-000000007.safetensors (go on with --resume auto)"),
            std::string::npos) << what << stopped.err;
  EXPECT_EQ(stopped.out, "") << what;  // no result line: the run did not finish
  EXPECT_EQ(stopNames(ckpt), (std::vector<std::string>{"latest.safetensors", "step-000000007.safetensors"}))
      << what;
  EXPECT_FALSE(std::filesystem::exists(dir + "/unused.safetensors")) << what;  // the directory's is the run's
  auto resumed = runShell(prefix + kStopRun + flags + " --max-steps 20 --resume auto --checkpoint-dir " +
                          ckpt + " --save " + dir + "/resumed.safetensors");
  ASSERT_EQ(resumed.code, 0) << what << resumed.err;
  EXPECT_NE(resumed.err.find("at step 7"), std::string::npos) << what << resumed.err;
  const std::string a = slurp(dir + "/straight.safetensors"), b = slurp(dir + "/resumed.safetensors");
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << what << ": the resumed run's checkpoint differs from the uninterrupted one's";
  std::filesystem::remove_all(dir);
}

TEST(CleanStop, LocalWorkersSaveAndResumeBitwise) {
  expectStopAndResume(DTRAIN_BIN, "--workers 2", "allreduce x 2");
}

TEST(CleanStop, LocalSgdMidPeriod) {
  // Step 7 is inside the second period of 4 steps: the resumed run restores each
  // worker's own parameters and the period's state.
  expectStopAndResume(DTRAIN_BIN, "--workers 2 --strategy local-sgd --sync-every 4", "local-sgd x 2");
}

TEST(CleanStop, OneProcessAndZeroThree) {
  expectStopAndResume(DTRAIN_BIN, "", "single");
  expectStopAndResume(DTRAIN_BIN, "--workers 2 --zero 3", "zero 3 x 2");
}

TEST(CleanStop, PipelineStagesAgreeOnTheStep) {
  expectStopAndResume(DTRAIN_BIN, "--workers 2 --pipeline-stages 2", "pipeline 2");
}

#ifdef DTRAIN_MPIEXEC
// Only rank 0's process gets the signal: rank 1 learns it through the step's vote.
TEST(CleanStop, MpiRanksAgreeOnTheStep) {
  expectStopAndResume(mpirun(2), "--backend mpi", "mpi 2");
  expectStopAndResume(mpirun(2), "--backend mpi --strategy local-sgd --sync-every 4", "local-sgd mpi 2");
}
#endif

TEST(CleanStop, WithoutACheckpointDirItSavesToSave) {
  const std::string dir = tempDir();
  auto r = runShell("DTRAIN_STOP_AT_STEP=5 " + std::string(DTRAIN_BIN) + kStopRun +
                    "--workers 2 --max-steps 20 --save " + dir + "/s.safetensors");
  EXPECT_EQ(r.code, 130) << r.err;
  EXPECT_NE(r.err.find("stopped by SIGINT after step 5: checkpoint " + dir + "/s.safetensors (go on with --resume " +
                       dir + "/s.safetensors)"), std::string::npos) << r.err;
  auto resumed = runShell(std::string(DTRAIN_BIN) + kStopRun + "--workers 2 --max-steps 6 --resume " + dir +
                          "/s.safetensors");
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("at step 5"), std::string::npos) << resumed.err;
  auto nothing = runShell("DTRAIN_STOP_AT_STEP=5 " + std::string(DTRAIN_BIN) + kStopRun + "--max-steps 20");
  EXPECT_EQ(nothing.code, 130) << nothing.err;
  EXPECT_NE(nothing.err.find("stopped by SIGINT after step 5; nothing saved"), std::string::npos) << nothing.err;
  std::filesystem::remove_all(dir);
}

// Parameter servers' ranks stop at their own steps: one line, no checkpoint, no hang.
TEST(CleanStop, ParameterServersStopWithoutSaving) {
  auto r = runShell("DTRAIN_STOP_AT_STEP=5 timeout 120 " + std::string(DTRAIN_BIN) + kStopRun +
                    "--workers 2 --strategy ps --servers 1 --max-steps 40");
  EXPECT_EQ(r.code, 130) << r.err;
  EXPECT_NE(r.err.find("--strategy ps saves nothing on a signal"), std::string::npos) << r.err;
  // Hogwild!'s threads share the parameters: the reporter saves them.
  const std::string dir = tempDir();
  auto h = runShell("DTRAIN_STOP_AT_STEP=5 timeout 120 " + std::string(DTRAIN_BIN) + kStopRun +
                    "--workers 2 --strategy hogwild --max-steps 40 --checkpoint-dir " + dir);
  EXPECT_EQ(h.code, 130) << h.err;
  EXPECT_EQ(stopNames(dir), (std::vector<std::string>{"latest.safetensors", "step-000000005.safetensors"}));
  std::filesystem::remove_all(dir);
}

// A 2-worker run with a checkpoint dir under `dir` and, once training is under
// way (the metrics file has a record), `sig` from outside `times` times in a
// row: its exit code and stderr.
struct SignalledRun {
  int code = -1;
  std::string err;
};
SignalledRun signalledRun(const std::string& dir, int sig, int times = 1) {
  const std::string ckpt = dir + "/ckpt", metrics = dir + "/m.jsonl";
  const std::string cmd = "exec " + std::string(DTRAIN_BIN) + kStopRun +
                          "--workers 2 --max-steps 100000000 --epochs 100000000 --log-every 10 --metrics " +
                          metrics + " --checkpoint-dir " + ckpt + " 2>" + dir + "/err";
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  SignalledRun r;
  EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  if (pid <= 0) return r;
  for (int i = 0; i < 1200 && slurp(metrics).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(slurp(metrics).empty()) << "no progress within a minute";
  for (int i = 0; i < times; ++i) kill(pid, sig);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(dir + "/err");
  return r;
}

// A real SIGTERM from outside, once training is under way: exit 143, the
// checkpoint of the step it names, and a resumed run to that step + 5 ends
// where a straight run to it does (constant learning rate: the stopped run's
// longer --max-steps does not change its steps).
TEST(CleanStop, RealSigtermFromOutside) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  const SignalledRun run = signalledRun(dir, SIGTERM);
  EXPECT_EQ(run.code, 143);
  const std::string& err = run.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, std::regex("stopped by SIGTERM after step (\\d+): checkpoint (\\S+)"))) << err;
  const int64_t step = std::stoll(m[1].str());
  EXPECT_EQ(stopNames(ckpt).back(), std::filesystem::path(m[2].str()).filename().string());
  const std::string total = std::to_string(step + 5);
  auto resumed = runShell(std::string(DTRAIN_BIN) + kStopRun + "--workers 2 --max-steps " + total +
                          " --resume auto --checkpoint-dir " + ckpt + " --save " + dir + "/r.safetensors");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  auto straight = runShell(std::string(DTRAIN_BIN) + kStopRun + "--workers 2 --max-steps " + total +
                           " --save " + dir + "/s.safetensors");
  ASSERT_EQ(straight.code, 0) << straight.err;
  EXPECT_TRUE(slurp(dir + "/r.safetensors") == slurp(dir + "/s.safetensors"));
  std::filesystem::remove_all(dir);
}

// SIGUSR1, what SLURM sends ahead of a time limit (--signal=USR1@60), stops
// the same way: exit 128 + 10, the line, the checkpoint it names. Sent twice at
// once, as a rank under SLURM gets it (from SLURM and from mpirun): one stop,
// not a second signal that ends the process without its checkpoint.
TEST(CleanStop, RealSigusr1FromOutside) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  const SignalledRun run = signalledRun(dir, SIGUSR1, 2);
  EXPECT_EQ(run.code, 138);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.err, m, std::regex("stopped by SIGUSR1 after step (\\d+): checkpoint (\\S+)")))
      << run.err;
  EXPECT_EQ(stopNames(ckpt).back(), std::filesystem::path(m[2].str()).filename().string());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtrain::test
