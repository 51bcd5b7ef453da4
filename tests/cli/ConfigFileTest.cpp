// `dtrain train --config FILE` and `--print-config` as a user runs them: the
// same run from a file and from flags ends bitwise equal; flags override the
// file; bad files and options the run would ignore exit 2 with one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/CliRunner.h"

using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {

const std::string kQuick = "train --dataset synthetic --synthetic-size 512 --max-steps 6 --progress off ";

std::string writeFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(ConfigFileCli, SameRunFromFileAndFlagsIsBitwiseEqual) {
  const std::string dir = tempDir();
  const std::string flags = "--optimizer adamw --lr 0.002 --batch-size 16 --workers 2 --seed 7";
  auto a = runDtrain(kQuick + flags + " --save " + dir + "/flags.safetensors");
  ASSERT_EQ(a.code, 0) << a.err;
  const std::string file = writeFile(dir, "run.toml", R"(
[optimizer]
name = "adamw"
lr = 0.002
[training]
batch_size = 16
seed = 7
[parallel]
workers = 2
)");
  auto b = runDtrain(kQuick + "--config " + file + " --save " + dir + "/file.safetensors");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(slurp(dir + "/flags.safetensors"), slurp(dir + "/file.safetensors"));
  // The printed configuration runs the same again.
  auto printed = runDtrain(kQuick + flags + " --print-config");
  ASSERT_EQ(printed.code, 0) << printed.err;
  EXPECT_NE(printed.out.find("[optimizer]\nname = \"adamw\"\nlr = 0.002\n"), std::string::npos) << printed.out;
  const std::string again = writeFile(dir, "printed.toml", printed.out);
  auto c = runDtrain("train --config " + again + " --save " + dir + "/printed.safetensors");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(slurp(dir + "/flags.safetensors"), slurp(dir + "/printed.safetensors"));
}

TEST(ConfigFileCli, FlagsOverrideTheFileAndTheResultLineRecordsIt) {
  const std::string dir = tempDir();
  const std::string file = writeFile(dir, "run.toml", "[training]\nbatch_size = 16\n[optimizer]\nlr = 0.01\n");
  auto r = runDtrain(kQuick + "--config " + file + " --batch-size 8");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string line = r.lastLine();
  EXPECT_NE(line.find("\"batch_size\":8"), std::string::npos) << line;
  EXPECT_NE(line.find("\"config\":{"), std::string::npos) << line;
  EXPECT_NE(line.find("\"lr\":0.01"), std::string::npos) << line;
}

TEST(ConfigFileCli, BadFilesExitTwoWithOneLine) {
  const std::string dir = tempDir();
  expectError(runDtrain(kQuick + "--config " + dir + "/missing.toml"), 2, "missing.toml: no such file");
  expectError(runDtrain(kQuick + "--config " + writeFile(dir, "a.toml", "[training]\nbatch = 3\n")), 2,
              "a.toml:2: unknown key 'batch' in [training]");
  expectError(runDtrain(kQuick + "--config " + writeFile(dir, "b.toml", "[training]\nepochs = \"x\"\n")), 2,
              "b.toml:2: [training] epochs: expected an integer, got a string");
  expectError(runDtrain(kQuick + "--config " + writeFile(dir, "c.toml", "[ps]\nservers = 2\n")), 2,
              "c.toml:2: [ps] servers does not apply to --strategy single");
  expectError(runDtrain(kQuick + "--config " + writeFile(dir, "d.toml", "[training\n")), 2, "d.toml:1: ");
  // A key of the group the model does not take: where it is, too.
  expectError(runDtrain(kQuick + "--config " + writeFile(dir, "e.toml", "[model]\nname = \"mlp\"\nn_layer = 4\n")),
              2, "e.toml:3: [model] n_layer: ");
}

// Options a run would have ignored (each exited 0 before) are refused.
TEST(ConfigFileCli, IgnoredFlagsAreRefused) {
  expectError(runDtrain(kQuick + "--servers 2 --consistency async"), 2, "--servers does not apply");
  expectError(runDtrain(kQuick + "--workers 2 --push-every 2"), 2, "--push-every does not apply");
  expectError(runDtrain(kQuick + "--workers 2 --fetch-every 2"), 2, "--fetch-every does not apply");
  expectError(runDtrain(kQuick + "--workers 2 --ps-timeout 5"), 2, "--ps-timeout does not apply");
  expectError(runDtrain(kQuick + "--pipeline-schedule gpipe"), 2, "--pipeline-schedule applies to --pipeline-stages");
  expectError(runDtrain(kQuick + "--placement spread"), 2, "--placement applies to meshes");
  expectError(runDtrain(kQuick + "--step-size 10"), 2, "--step-size applies to --schedule step");
  expectError(runDtrain(kQuick + "--gamma 0.5"), 2, "--gamma applies to --schedule step");
  expectError(runDtrain(kQuick + "--eval-batches 4"), 2, "--eval-batches applies to the gpt-* models");
  // (--checkpoint-dir alone is used: a Ctrl-C saves there.)
  expectError(runDtrain(kQuick + "--call-timeout 5"), 2, "--call-timeout applies to runs of several ranks");
}

TEST(ConfigFileCli, HelpShowsGroupsAndChoices) {
  auto r = runDtrain("train --help");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("{constant,step,cosine}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Parameter servers:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fedavg"), std::string::npos);
  EXPECT_EQ(r.out.find("{false}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--config"), std::string::npos);
}

TEST(ConfigFileCli, ShippedConfigsAreValid) {
  for (const auto& entry : fs::directory_iterator(std::string(DTRAIN_SCRIPTS) + "/../configs")) {
    auto r = runDtrain("train --config " + entry.path().string() + " --print-config");
    EXPECT_EQ(r.code, 0) << entry.path() << ": " << r.err;
  }
}
