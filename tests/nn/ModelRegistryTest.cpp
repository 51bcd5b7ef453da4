// The model registry: names, the task of each model, architecture overrides.
#include <gtest/gtest.h>

#include "nn/Gpt.h"
#include "nn/ModelRegistry.h"

using namespace dtrain;
using namespace dtrain::nn;

TEST(ModelRegistry, EveryBuiltInWithItsTask) {
  const std::vector<std::string> expected{"mlp", "lenet", "resnet-20", "resnet-32", "resnet-56", "gpt-tiny", "gpt-small", "gpt-base"};
  EXPECT_EQ(registeredModelNames(), expected);
  EXPECT_EQ(modelInfo("mlp").task, kClassificationTask);
  EXPECT_EQ(modelInfo("lenet").task, kClassificationTask);
  const ModelInfo gpt = modelInfo("gpt-small");
  EXPECT_EQ(gpt.task, kLanguageModelTask);
  EXPECT_EQ(gpt.blockSize, 128);
  EXPECT_EQ(gpt.vocab, 256);
  try {
    modelInfo("resnet");
    FAIL() << "an unknown model was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("gpt-tiny"), std::string::npos) << e.what();
  }
}

TEST(ModelRegistry, OverridesChangeTheGptAndAreRefusedElsewhere) {
  ModelOverrides o;
  o.nLayer = 1;
  o.nEmbd = 32;
  o.nHead = 4;
  o.blockSize = 16;
  EXPECT_EQ(modelInfo("gpt-tiny", o).blockSize, 16);
  auto m = buildModel("gpt-tiny", o, 0);
  GptConfig c;
  c.nLayer = 1;
  c.nHead = 4;
  c.nEmbd = 32;
  c.blockSize = 16;
  EXPECT_EQ(m->parameterCount(), gptParameterCount(c));
  EXPECT_EQ(m->parameterAliases().size(), 1u);
  EXPECT_THROW(buildModel("mlp", o, 0), UsageError);
  ModelOverrides bad;
  bad.nEmbd = 30;
  bad.nHead = 4;
  EXPECT_THROW(modelInfo("gpt-tiny", bad), UsageError);
  // Classifiers come out as before (the same init as makeModel).
  EXPECT_EQ(buildModel("mlp", {}, 0)->parameterCount(), 784 * 256 + 256 + 256 * 256 + 256 + 2570);
}
