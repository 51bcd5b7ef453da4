// `dtrain launch`'s usage errors: one line, exit 2, before any host or mpirun
// is touched (the run itself is tested on emulated hosts: tests/netsim/launch_test.sh).
#include <gtest/gtest.h>

#include <fstream>

#include "cli/CliRunner.h"

using namespace dtrain::test;

namespace {
const std::string kLaunchTrain = " -- train --model mlp --dataset synthetic --checkpoint-every 10 --checkpoint-dir /tmp/dtrain-launch-never";
}  // namespace

TEST(LaunchErrors, NeedsTheTrainCommand) {
  expectError(runDtrain("launch --netsim 3"), 2, "train command after '--'");
  expectError(runDtrain("launch --netsim 3 -- bench allreduce"), 2, "train command after '--'");
}

TEST(LaunchErrors, NeedsCheckpoints) {
  expectError(runDtrain("launch --netsim 3 -- train --checkpoint-every 5"), 2, "--checkpoint-dir");
  expectError(runDtrain("launch --netsim 3 -- train --checkpoint-dir /tmp/x"), 2, "--checkpoint-every");
  expectError(runDtrain("launch --netsim 3 -- train --checkpoint-dir /tmp/x --checkpoint-every 0"), 2,
              "--checkpoint-every");
}

TEST(LaunchErrors, HostsGivenOnce) {
  expectError(runDtrain("launch" + kLaunchTrain), 2, "exactly one of --netsim");
  expectError(runDtrain("launch --netsim 2 --hosts a,b" + kLaunchTrain), 2, "exactly one of --netsim");
}

TEST(LaunchErrors, MinHostsWithinTheHosts) {
  expectError(runDtrain("launch --netsim 3 --min-hosts 4" + kLaunchTrain), 2, "--min-hosts 4");
  expectError(runDtrain("launch --hosts a:2,b:2 --min-hosts 0" + kLaunchTrain), 2, "--min-hosts 0");
}

TEST(LaunchErrors, GlobalBatchThatCannotBeKept) {
  // 3 hosts x batch 3 = 9: on 2 hosts neither the batch nor the accumulation divides it.
  expectError(runDtrain("launch --hosts a,b,c --min-hosts 2" + kLaunchTrain + " --batch-size 3"), 2,
              "global batch of 9");
}

// calibrate --hosts asks each host first: one line naming the one that does
// not answer (not minutes of local measurements, then mpirun's error).
TEST(LaunchErrors, CalibrateNamesAHostThatDoesNotAnswer) {
  expectError(runDtrain("calibrate --hosts localhost,dtrain-no-such-host.invalid --out /tmp/dtrain-never.json"), 2,
              "calibrate --hosts: host dtrain-no-such-host.invalid does not answer");
}

// A --config file as in train: the launch reads its checkpoints and batch (here
// 3 x 3 = 9, which 2 hosts cannot keep: refused before any host is touched).
TEST(LaunchErrors, ConfigFileGivesTheCheckpointsAndTheBatch) {
  const std::string dir = tempDir(), toml = dir + "/run.toml";
  std::ofstream(toml) << "[checkpoint]\ndir = \"" << dir << "/ckpt\"\nevery = 10\n[training]\nbatch_size = 3\n";
  expectError(runDtrain("launch --hosts a,b,c --min-hosts 2 -- train --config " + toml), 2, "global batch of 9");
  std::ofstream(toml) << "[training]\nbatch_size = 3\n";
  expectError(runDtrain("launch --hosts a,b,c -- train --config " + toml), 2, "[checkpoint] dir in its --config");
  expectError(runDtrain("launch --hosts a,b,c -- train --config " + dir + "/none.toml"), 2, "none.toml");
}
