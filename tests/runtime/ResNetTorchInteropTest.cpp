// dtrain's resnet-20 against torch_resnet.py's model class (scripts/resnet_interop.py):
// the same parameters and BatchNorm buffers give the same logits, loss, gradients,
// and after one SGD step the same parameters and running statistics; checkpoints
// load into the reference model with strict=True and its state_dict into dtrain.
// Skipped when /usr/bin/python3 has no torch or the reference script is not there.
// Also: the trainer's evaluation switches BatchNorm to eval mode and back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "autograd/Ops.h"
#include "nn/Init.h"
#include "nn/ModelRegistry.h"
#include "optim/Factory.h"
#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"
#include "runtime/TestUtil.h"
#include "runtime/Trainer.h"

using namespace dtrain;
using dtrain::testing::haveTorch;
using dtrain::testing::sourceDir;
using dtrain::testing::TempDir;

namespace {

// The project's shared folder beside the source tree (DTRAIN_SHARED_DIR
// overrides it, e.g. for a checkout elsewhere).
std::string resnetReference() {
  const char* shared = std::getenv("DTRAIN_SHARED_DIR");
  return (shared ? std::string(shared) : sourceDir() + "/../shared") + "/bench/torch_resnet.py";
}

int runResNetInterop(const std::string& args, const std::string& log) {
  const std::string cmd = "/usr/bin/python3 " + sourceDir() + "/scripts/resnet_interop.py " + args +
                          " --reference " + resnetReference() + " > " + log + " 2>&1";
  return std::system(cmd.c_str());
}

void randomBatch(Tensor& x, Tensor& y, uint64_t seed) {
  Rng rng(seed);
  nn::init::normal(x, 0.3f, 1.f, rng);
  for (int64_t i = 0; i < y.numel(); ++i)
    y.data<int32_t>()[i] = static_cast<int32_t>(rng.uniform() * 10) % 10;
}

}  // namespace

TEST(ResNetTorchInterop, OneSgdStepMatchesTorchResNet) {
  if (!haveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  if (!std::filesystem::exists(resnetReference())) GTEST_SKIP() << resnetReference() << " not found";
  TempDir dir;
  auto m = nn::buildModel("resnet-20", {}, 7);
  optim::OptimizerOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weightDecay = 5e-4;
  // Two steps first (another optimizer: the compared step starts torch's SGD
  // fresh), so the running statistics and weights are away from their init.
  auto warm = optim::makeOptimizer("sgd", m->namedParameters(), o);
  // Batch 32: a ReLU input within rounding of zero may land on the other side
  // in dtrain and torch, and BatchNorm spreads that over the batch; the larger
  // the batch, the less (scripts/resnet_interop.py compares gradients by norm).
  const int64_t B = 32;
  Tensor x = Tensor::empty({B, 1, 28, 28}), y = Tensor::empty({B}, DType::I32);
  for (int s = 0; s < 2; ++s) {
    randomBatch(x, y, 100 + s);
    warm->zeroGrad();
    autograd::crossEntropy(m->forward(autograd::Variable(x)), y).backward();
    warm->step();
  }
  std::vector<std::pair<std::string, Tensor>> file;
  for (auto& [name, p] : m->namedParameters()) file.emplace_back(name, p.data().clone());
  for (auto& [name, t] : m->namedBuffers()) file.emplace_back(name, t->clone());
  randomBatch(x, y, 200);
  auto opt = optim::makeOptimizer("sgd", m->namedParameters(), o);
  opt->zeroGrad();
  autograd::Variable logits = m->forward(autograd::Variable(x));
  autograd::Variable loss = autograd::crossEntropy(logits, y);
  loss.backward();
  file.emplace_back("input.x", x);
  file.emplace_back("input.y", y);
  file.emplace_back("output.logits", logits.data());
  file.emplace_back("output.loss", loss.data());
  for (auto& [name, p] : m->namedParameters()) file.emplace_back("grad." + name, p.grad().clone());
  opt->step();
  for (auto& [name, p] : m->namedParameters()) file.emplace_back("after." + name, p.data());
  for (auto& [name, t] : m->namedBuffers()) file.emplace_back("after." + name, *t);
  const std::string path = dir.file("resnet.safetensors"), log = dir.file("resnet.log");
  runtime::saveSafetensors(path, file,
                           {{"lr", "0.05"}, {"momentum", "0.9"}, {"weight_decay", "0.0005"},
                            {"blocks", "3"}});
  EXPECT_EQ(runResNetInterop("step " + path, log), 0) << dtrain::testing::readBytes(log);
}

TEST(ResNetTorchInterop, CheckpointsLoadBothWays) {
  if (!haveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  if (!std::filesystem::exists(resnetReference())) GTEST_SKIP() << resnetReference() << " not found";
  TempDir dir;
  // dtrain -> torch: a checkpoint with optimizer state and moved running statistics.
  auto m = nn::buildModel("resnet-20", {}, 3);
  optim::OptimizerOptions o;
  o.momentum = 0.9;
  auto opt = optim::makeOptimizer("sgd", m->namedParameters(), o);
  Tensor x = Tensor::empty({4, 1, 28, 28}), y = Tensor::empty({4}, DType::I32);
  randomBatch(x, y, 1);
  autograd::crossEntropy(m->forward(autograd::Variable(x)), y).backward();
  opt->step();
  runtime::TrainState st;
  st.metadata["model"] = "resnet-20";
  const std::string path = dir.file("dtrain.safetensors"), log = dir.file("load.log");
  runtime::saveCheckpoint(path, *m, opt.get(), st);
  EXPECT_EQ(runResNetInterop("load " + path, log), 0) << dtrain::testing::readBytes(log);

  // torch -> dtrain: the reference's initial state_dict, every tensor as written.
  const std::string torchPath = dir.file("torch.safetensors"), saveLog = dir.file("save.log");
  ASSERT_EQ(runResNetInterop("save " + torchPath + " --seed 4", saveLog), 0)
      << dtrain::testing::readBytes(saveLog);
  auto fresh = nn::buildModel("resnet-20", {}, 1);
  runtime::loadCheckpoint(torchPath, *fresh, nullptr, nullptr);
  auto loaded = runtime::loadSafetensors(torchPath);
  int64_t compared = 0;
  for (auto& [name, p] : fresh->namedParameters()) {
    const Tensor* t = loaded.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(p.data().toVector(), t->toVector()) << name;
    ++compared;
  }
  for (auto& [name, b] : fresh->namedBuffers()) {
    const Tensor* t = loaded.find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(b->dtype(), t->dtype()) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 65 + 63);  // 21 convs + 21 BN x 2 + fc x 2 parameters; 21 BN x 3 buffers
}

// The trainer's evaluation runs BatchNorm in eval mode (the running statistics,
// untouched) and leaves the model training again.
TEST(ResNetEvaluation, EvalModeAndBack) {
  runtime::TrainConfig c;
  c.dataset = "synthetic";
  c.syntheticSize = 40;
  auto data = runtime::loadDataset(c, false);
  auto m = nn::buildModel("resnet-20", {}, 2);
  std::vector<std::vector<float>> before;
  for (auto& [name, t] : m->namedBuffers())
    if (t->dtype() == DType::F32) before.push_back(t->toVector());
  const auto [accuracy, loss] = runtime::evaluate(*m, *data, 4);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_TRUE(m->isTraining());
  size_t i = 0;
  for (auto& [name, t] : m->namedBuffers()) {
    if (t->dtype() == DType::F32) EXPECT_EQ(t->toVector(), before[i++]) << name;
    else EXPECT_EQ(*t->data<int64_t>(), 0) << name;
  }
  // In training mode the same forward moves them.
  Tensor x = Tensor::empty({4, 1, 28, 28}), y = Tensor::empty({4}, DType::I32);
  randomBatch(x, y, 3);
  m->forward(autograd::Variable(x));
  EXPECT_NE(m->namedBuffers()[0].second->toVector(), before[0]);
}
