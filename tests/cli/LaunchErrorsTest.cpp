// `dtrain launch`'s usage errors: one line, exit 2, before any host or mpirun
// is touched (the run itself is tested on emulated hosts: tests/netsim/launch_test.sh).
#include <gtest/gtest.h>

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

TEST(LaunchErrors, ConfigFileRefused) {
  expectError(runDtrain("launch --netsim 2" + kLaunchTrain + " --config run.toml"), 2, "--config");
}
