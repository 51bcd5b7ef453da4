// A checkpoint of `dtrain train --model gpt-*` loads into torch_gpt.py's GPT
// with load_state_dict(strict=True) (scripts/gpt_interop.py load): the tied
// lm_head.weight is written under both names. Skipped without torch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/Task.h"
#include "runtime/TestUtil.h"
#include "runtime/Trainer.h"

using namespace dtrain;
using dtrain::testing::haveTorch;
using dtrain::testing::sourceDir;
using dtrain::testing::TempDir;

TEST(GptCheckpointTorch, TrainedCheckpointLoadsStrictlyIntoTorchGpt) {
  if (!haveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  const std::string reference = sourceDir() + "/../shared/bench/torch_gpt.py";
  if (!std::filesystem::exists(reference)) GTEST_SKIP() << reference << " not found";
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += "In the beginning God created the heaven and the earth.\n";
  dtrain::testing::writeBytes(dir.file("text.txt"), text);
  runtime::TrainConfig c;
  c.model = "gpt-tiny";
  runtime::applyTaskDefaults(c, [](const char*) { return false; });
  c.textFile = dir.file("text.txt");
  c.nLayer = 1;
  c.blockSize = 32;
  c.batchSize = 2;
  c.maxSteps = 2;
  c.evalBatches = 1;
  c.progress = runtime::TrainConfig::Progress::Off;
  c.save = dir.file("gpt.safetensors");
  runtime::Trainer t(c, std::make_unique<parallel::SingleProcess>());
  t.run();
  const std::string cmd = "/usr/bin/python3 " + sourceDir() + "/scripts/gpt_interop.py load " +
                          c.save + " --reference " + reference;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
