// Round trips through PyTorch with scripts/torch_interop.py, skipped when
// /usr/bin/python3 has no torch (Debian's python3-torch).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "nn/Models.h"
#include "optim/Factory.h"
#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"
#include "runtime/TestUtil.h"

using namespace dtrain;
using namespace dtrain::runtime;
using dtrain::testing::haveTorch;
using dtrain::testing::TempDir;

namespace {

std::string script() { return dtrain::testing::sourceDir() + "/scripts/torch_interop.py"; }

int runPython(const std::string& args, const std::string& log) {
  return std::system(("/usr/bin/python3 " + script() + " " + args + " > " + log + " 2>&1").c_str());
}

}  // namespace

TEST(TorchInterop, DtrainCheckpointLoadsIntoTorchSequential) {
  if (!haveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  TempDir dir;
  for (const std::string model : {"mlp", "lenet"}) {
    auto m = nn::makeModel(model, 1);
    optim::OptimizerOptions o;
    o.momentum = 0.9;
    auto opt = optim::makeOptimizer("sgd", m->namedParameters(), o);
    opt->ensureState();
    TrainState st;
    st.step = 5;
    st.metadata["model"] = model;
    const std::string path = dir.file(model + ".safetensors");
    saveCheckpoint(path, *m, opt.get(), st);
    const std::string log = dir.file(model + ".log");
    EXPECT_EQ(runPython("load " + model + " " + path, log), 0)
        << model << ": " << dtrain::testing::readBytes(log);
  }
}

TEST(TorchInterop, TorchStateDictLoadsIntoDtrainModel) {
  if (!haveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  TempDir dir;
  for (const std::string model : {"mlp", "lenet"}) {
    const std::string path = dir.file("torch_" + model + ".safetensors");
    const std::string log = dir.file(model + ".log");
    ASSERT_EQ(runPython("save " + model + " " + path + " --seed 3", log), 0)
        << dtrain::testing::readBytes(log);
    auto m = nn::makeModel(model, 1);
    auto opt = optim::makeOptimizer("adam", m->namedParameters());
    TrainState st;
    CheckpointInfo info = loadCheckpoint(path, *m, opt.get(), &st);
    EXPECT_FALSE(info.hasTrainState);
    EXPECT_FALSE(info.hasOptimizerState);
    auto file = loadSafetensors(path);
    for (auto& [name, v] : m->namedParameters()) {
      const Tensor* t = file.find(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(v.data().toVector(), t->toVector()) << name;
    }
  }
}
