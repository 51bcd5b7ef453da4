// dtrain's GPT against torch_gpt.py's model class (scripts/gpt_interop.py):
// the same parameters give the same logits, loss and gradients. Skipped when
// /usr/bin/python3 has no torch or the reference script is not there.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "nn/Gpt.h"
#include "optim/Factory.h"
#include "runtime/Safetensors.h"
#include "runtime/TestUtil.h"

using namespace dtrain;
using dtrain::testing::haveTorch;
using dtrain::testing::sourceDir;
using dtrain::testing::TempDir;

namespace {

Tensor bytesOf(const std::string& text, int64_t B, int64_t T, int64_t shift) {
  Tensor t = Tensor::empty({B, T}, DType::I32);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i)
      t.data<int32_t>()[b * T + i] =
          static_cast<unsigned char>(text[(7 * b + i + shift) % text.size()]);
  return t;
}

}  // namespace

TEST(GptTorchInterop, LogitsLossAndGradientsMatchTorchGpt) {
  if (!haveTorch()) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  const std::string reference = sourceDir() + "/../shared/bench/torch_gpt.py";
  if (!std::filesystem::exists(reference)) GTEST_SKIP() << reference << " not found";
  TempDir dir;
  // Two layers with T (13) below the block size; a few Adam steps first so
  // that the weights are away from nanoGPT's near-zero init.
  nn::GptConfig config{2, 2, 16, 16, 256};
  auto m = nn::makeGpt(config, 11);
  const std::string text = "In the beginning God created the heaven and the earth. ";
  Tensor x = bytesOf(text, 3, 13, 0), y = bytesOf(text, 3, 13, 1);
  auto opt = optim::makeOptimizer("adam", m->namedParameters(), {.lr = 2e-2});
  for (int step = 0; step < 5; ++step) {
    opt->zeroGrad();
    m->loss(x, y).backward();
    opt->step();
  }
  m->zeroGrad();
  autograd::Variable logits = m->forward(autograd::Variable(x));
  autograd::Variable loss = autograd::crossEntropy(logits, y);
  loss.backward();

  std::vector<std::pair<std::string, Tensor>> file = m->stateDict();
  file.emplace_back("input.tokens", x);
  file.emplace_back("input.targets", y);
  file.emplace_back("output.logits", logits.data());
  file.emplace_back("output.loss", loss.data());
  for (auto& [name, p] : m->namedParameters()) file.emplace_back("grad." + name, p.grad());
  const std::string path = dir.file("gpt.safetensors"), log = dir.file("gpt.log");
  runtime::saveSafetensors(path, file,
                           {{"n_layer", std::to_string(config.nLayer)},
                            {"n_head", std::to_string(config.nHead)},
                            {"n_embd", std::to_string(config.nEmbd)},
                            {"block", std::to_string(config.blockSize)}});
  const std::string cmd = "/usr/bin/python3 " + sourceDir() + "/scripts/gpt_interop.py compare " +
                          path + " --reference " + reference + " > " + log + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << dtrain::testing::readBytes(log);
}
