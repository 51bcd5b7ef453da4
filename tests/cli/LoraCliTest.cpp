// LoRA and --recompute through the dtrain command: usage errors, only the
// adapters' gradients allreduced by 2 workers (and served by parameter
// servers; Hogwild! shares a frozen base), a frozen base after training,
// adapters saved alone, and `export --merge-lora` (loaded by torch when present).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "TestData.h"
#include "cli/CliRunner.h"
#include "nn/Lora.h"
#include "nn/ModelRegistry.h"
#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

const std::string kMlp = "train --dataset synthetic --synthetic-size 256 --max-steps 2 --progress off ";

// gpt-tiny cut to one block of 32 tokens on a small text file.
std::string gptRun(const std::string& dir) {
  const std::string text = dir + "/text.txt";
  std::ofstream(text, std::ios::binary) << sampleText(6000);
  return "train --model gpt-tiny --n-layer 1 --block-size 32 --batch-size 2 --eval-batches 1 "
         "--max-steps 3 --progress off --text-file " + text + " ";
}

nlohmann::json lastJson(const CliResult& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.lastLine());
}

bool sameBytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.contiguous().rawData(), b.contiguous().rawData(), a.nbytes()) == 0;
}

}  // namespace

TEST(LoraCli, UsageErrors) {
  expectError(runDtrain(kMlp + "--lora-rank 0"), 2, "--lora-rank must be >= 1 (got 0)");
  expectError(runDtrain(kMlp + "--lora-rank -3"), 2, "--lora-rank must be >= 1 (got -3)");
  expectError(runDtrain(kMlp + "--lora-rank 2 --lora-targets ffn"), 2, "unknown target 'ffn'");
  expectError(runDtrain(kMlp + "--lora-rank 2 --lora-targets attn"), 2, "model mlp has no such layers");
  expectError(runDtrain(kMlp + "--model lenet --lora-rank 2"), 2, "lenet has no LoRA targets");
  expectError(runDtrain(kMlp + "--lora-alpha 4"), 2, "--lora-alpha needs --lora-rank");
  expectError(runDtrain(kMlp + "--lora-rank 2 --lora-alpha 0"), 2, "--lora-alpha must be > 0 (got 0)");
  expectError(runDtrain(kMlp + "--recompute some"), 2, "known: none, blocks, all");
  expectError(runDtrain("export --merge-lora /nonexistent.safetensors /tmp/x.safetensors"), 1,
              "/nonexistent.safetensors");
}

TEST(LoraCli, MlpReportsTrainableParametersAndRecomputeRuns) {
  auto full = lastJson(runDtrain(kMlp + "--recompute blocks"));
  EXPECT_EQ(full["trainable_parameters"], full["parameters"]);
  auto lora = lastJson(runDtrain(kMlp + "--lora-rank 2"));
  // 784->256, 256->256, 256->10 at rank 2: 2 (784 + 256) + 2 (256 + 256) + 2 (256 + 10).
  EXPECT_EQ(lora["trainable_parameters"], 2 * (1040 + 512 + 266));
  EXPECT_EQ(lora["parameters"].get<int64_t>(),
            full["parameters"].get<int64_t>() + lora["trainable_parameters"].get<int64_t>());
  EXPECT_EQ(lora["optimizer_state_bytes"].get<int64_t>(),
            4 * lora["trainable_parameters"].get<int64_t>() /* sgd momentum, f32 */ + 6 * 8 /* steps */);
}

TEST(LoraCli, TwoWorkersAllreduceOnlyTheAdapters) {
  const std::string dir = tempDir();
  const std::string run = gptRun(dir) + "--workers 2 --recompute blocks ";
  auto full = lastJson(runDtrain(run));
  auto lora = lastJson(runDtrain(run + "--lora-rank 2"));
  const double trainable = lora["trainable_parameters"].get<double>();
  EXPECT_LT(trainable * 20, lora["parameters"].get<double>());
  EXPECT_EQ(lora["allreduce_bytes"].get<double>(), 4 * trainable);
  EXPECT_EQ(full["allreduce_bytes"].get<double>(), 4 * full["parameters"].get<double>());
  // Measured on the wire: a 2-rank allreduce sends about its bytes once per worker.
  const double sent = lora["bytes_sent_per_worker"].get<double>();
  EXPECT_GT(sent, 0);
  EXPECT_LE(sent, 2 * lora["allreduce_bytes"].get<double>());
  EXPECT_GT(full["bytes_sent_per_worker"].get<double>(), 10 * sent);
}

TEST(LoraCli, ParameterServersServeOnlyTheAdapters) {
  // Sync ps is allreduce with the averaging on the servers: the same model
  // and optimizer state, and only the adapters go to the servers and back.
  const std::string dir = tempDir();
  const std::string run = gptRun(dir) + "--workers 2 --lora-rank 2 --lr 0.01 ";
  auto ar = lastJson(runDtrain(run + "--save " + dir + "/ar.safetensors"));
  auto ps = lastJson(runDtrain(run + "--strategy ps --servers 2 --consistency sync --save " + dir +
                               "/ps.safetensors"));
  const auto a = runtime::loadSafetensors(dir + "/ar.safetensors");
  const auto p = runtime::loadSafetensors(dir + "/ps.safetensors");
  ASSERT_EQ(a.tensors.size(), p.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    const Tensor* other = p.find(name);
    ASSERT_TRUE(other) << name;
    EXPECT_TRUE(sameBytes(*other, t)) << name;
  }
  const double trainable = ps["trainable_parameters"].get<double>();
  // A push and a reply of the adapters per step, plus headers and control messages.
  EXPECT_LT(ps["bytes_sent_per_worker"].get<double>(), 1.5 * 4 * trainable);
  std::filesystem::remove_all(dir);
}

TEST(LoraCli, HogwildTrainsTheAdaptersOfASharedFrozenBase) {
  const std::string dir = tempDir();
  const std::string run = gptRun(dir) + "--lora-rank 2 --lr 0.01 ";
  lastJson(runDtrain(run + "--max-steps 0 --save " + dir + "/init.safetensors"));
  lastJson(runDtrain(run + "--workers 2 --strategy hogwild --save " + dir + "/hog.safetensors"));
  const auto init = runtime::loadSafetensors(dir + "/init.safetensors");
  const auto hog = runtime::loadSafetensors(dir + "/hog.safetensors");
  int moved = 0;
  for (const auto& [name, t] : hog.tensors) {
    if (name.starts_with("optimizer.")) continue;
    const Tensor* before = init.find(name);
    ASSERT_TRUE(before) << name;
    if (nn::isLoraParameter(name)) moved += !sameBytes(t, *before);
    else EXPECT_TRUE(sameBytes(t, *before)) << name << " is frozen";
  }
  EXPECT_GT(moved, 0);
  std::filesystem::remove_all(dir);
}

TEST(LoraCli, FrozenBaseAdaptersAloneAndMergeExport) {
  const std::string dir = tempDir();
  const std::string lora = dir + "/lora.safetensors", adapters = dir + "/adapters.safetensors",
                    base = dir + "/base.safetensors", merged = dir + "/merged.safetensors",
                    merged2 = dir + "/merged2.safetensors";
  // Weight decay on (gpt default 0.1): a frozen weight must still not move.
  lastJson(runDtrain(gptRun(dir) + "--lora-rank 2 --lora-alpha 4 --lr 0.01 --save " + lora +
                     " --save-adapters " + adapters));
  // The base: the same seed's initial model.
  nn::ModelOverrides o;
  o.nLayer = 1;
  o.blockSize = 32;
  auto model = nn::buildModel("gpt-tiny", o, 0);
  runtime::TrainState state;
  state.metadata = {{"model", "gpt-tiny"}, {"n_layer", "1"}, {"block_size", "32"}};
  runtime::saveCheckpoint(base, *model, nullptr, state);

  auto trained = runtime::loadSafetensors(lora);
  int adaptersMoved = 0;
  for (auto& [name, p] : model->namedParameters()) {
    const Tensor* t = trained.find(name);
    ASSERT_TRUE(t) << name;
    EXPECT_TRUE(sameBytes(*t, p.data())) << name << " is frozen but changed";
  }
  auto alone = runtime::loadSafetensors(adapters);
  EXPECT_EQ(alone.tensors.size(), 8u);  // c_attn, c_proj, c_fc, c_proj: A and B each
  for (auto& [name, t] : alone.tensors) {
    ASSERT_TRUE(trained.find(name)) << name;
    EXPECT_TRUE(sameBytes(t, *trained.find(name))) << name;
    if (name.ends_with("lora_B.weight")) adaptersMoved += t.contiguous().data<float>()[0] != 0.f;
  }
  EXPECT_GT(adaptersMoved, 0);

  // The merged full checkpoint equals the base merged with the adapters alone.
  auto r1 = lastJson(runDtrain("export --merge-lora " + lora + " " + merged));
  EXPECT_EQ(r1["merged_layers"], 4);
  EXPECT_DOUBLE_EQ(r1["scale"].get<double>(), 2.0);
  lastJson(runDtrain("export --merge-lora " + base + " " + merged2 + " --adapters " + adapters));
  auto m1 = runtime::loadSafetensors(merged), m2 = runtime::loadSafetensors(merged2);
  ASSERT_EQ(m1.tensors.size(), m2.tensors.size());
  for (auto& [name, t] : m1.tensors) {
    EXPECT_FALSE(name.find("lora_") != std::string::npos || name.starts_with("optimizer.")) << name;
    ASSERT_TRUE(m2.find(name)) << name;
    EXPECT_TRUE(sameBytes(t, *m2.find(name))) << name;
  }
  EXPECT_FALSE(sameBytes(*m1.find("transformer.h.0.attn.c_attn.weight"),
                         *trained.find("transformer.h.0.attn.c_attn.weight")));
  // A plain checkpoint: dtrain loads it without LoRA flags.
  lastJson(runDtrain(gptRun(dir) + "--max-steps 1 --load " + merged));
  // generate takes the merged file and names the merge for the LoRA one.
  expectError(runDtrain("generate --load " + lora + " --prompt a --max-new-tokens 1"), 2,
              "this file holds LoRA adapters: merge them into the base weights first (dtrain export "
              "--merge-lora " + lora + " merged.safetensors)");

  const char* src = std::getenv("DTRAIN_SOURCE_DIR");
  const std::string reference = std::string(src ? src : ".") + "/../shared/bench/torch_gpt.py";
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' > /dev/null 2>&1") != 0 ||
      !std::filesystem::exists(reference))
    GTEST_SKIP() << "no torch or no " << reference;
  const std::string cmd = std::string("/usr/bin/python3 ") + DTRAIN_SCRIPTS + "/gpt_interop.py load " +
                          merged + " --reference " + reference;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
