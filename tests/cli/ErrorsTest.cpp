// Every bad input a user can give: one line on stderr naming the problem, exit
// code 2 (usage/configuration) or 1 (failure while running), never a crash,
// a hang or a partial checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/CliRunner.h"
#include "runtime/Safetensors.h"
#include "tensor/Tensor.h"

using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {
// A quick, valid run on synthetic data to which one bad flag is added.
const std::string kQuick = "train --dataset synthetic --synthetic-size 512 --max-steps 3 --progress off ";

}  // namespace

TEST(CliErrors, UnknownFlag) {
  expectError(runDtrain(kQuick + "--bogus 3"), 2, "unknown flag --bogus (see dtrain train --help)");
  // A near miss: the flag meant (CLI11 alone said "arguments were not expected: 2 --epoch").
  expectError(runDtrain(kQuick + "--epoch 2"), 2, "unknown flag --epoch; did you mean --epochs?");
  expectError(runDtrain(kQuick + "--max-step=2"), 2, "did you mean --max-steps?");
}

// A flag of another strategy's: the one meant.
TEST(CliErrors, ServersUnderSandblasterNamesItsOwnFlag) {
  expectError(runDtrain(kQuick + "--optimizer lbfgs --strategy sandblaster --workers 2 --servers 1"), 2,
              "--servers does not apply to --strategy sandblaster (its parameter shards: "
              "--sandblaster-servers)");
}

TEST(CliErrors, UnknownSubcommandOrNone) {
  expectError(runDtrain("fly"), 2, "fly");
  EXPECT_EQ(runDtrain("").code, 2);
}

TEST(CliErrors, UnknownModel) { expectError(runDtrain(kQuick + "--model resnet"), 2, "resnet"); }

TEST(CliErrors, NonPositiveBatchSize) {
  expectError(runDtrain(kQuick + "--batch-size 0"), 2, "--batch-size must be >= 1 (got 0)");
  expectError(runDtrain(kQuick + "--batch-size -5"), 2, "--batch-size");
}

TEST(CliErrors, NanOrNegativeLearningRate) {
  expectError(runDtrain(kQuick + "--lr nan"), 2, "--lr");
  expectError(runDtrain(kQuick + "--lr -1"), 2, "--lr");
}

TEST(CliErrors, UnknownPrecisionOrGemmBackend) {
  expectError(runDtrain(kQuick + "--precision fp8"), 2, "known: fp32, bf16");
  expectError(runDtrain(kQuick + "--precision fp16"), 2, "GPU");
  expectError(runDtrain(kQuick + "--gemm mkl"), 2, "known: auto, onednn, openblas");
}

TEST(CliErrors, NotANumber) {
  expectError(runDtrain(kQuick + "--epochs many"), 2, "--epochs many: expected an integer");
  expectError(runDtrain(kQuick + "--threads many"), 2, "--threads many: expected an integer or auto");
}

TEST(CliErrors, MissingDataDirSaysHowToInstall) {
  auto r = runDtrain("train --data-dir /nonexistent/fmnist --progress off");
  expectError(r, 2, "/nonexistent/fmnist");
  EXPECT_NE(r.err.find("apt-get install dataset-fashion-mnist"), std::string::npos) << r.err;
}

TEST(CliErrors, TruncatedIdxFileIsNamed) {
  fs::path dir = tempDir();
  // Copy the real label files; write a truncated training image file.
  std::ofstream img(dir / "train-images-idx3-ubyte", std::ios::binary);
  const unsigned char header[] = {0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28, 1, 2, 3};
  img.write(reinterpret_cast<const char*>(header), sizeof header);
  img.close();
  std::ofstream lab(dir / "train-labels-idx1-ubyte", std::ios::binary);
  const unsigned char lh[] = {0, 0, 8, 1, 0, 0, 0, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0};
  lab.write(reinterpret_cast<const char*>(lh), sizeof lh);
  lab.close();
  fs::copy_file(dir / "train-images-idx3-ubyte", dir / "t10k-images-idx3-ubyte");
  fs::copy_file(dir / "train-labels-idx1-ubyte", dir / "t10k-labels-idx1-ubyte");
  auto r = runDtrain("train --progress off --data-dir " + dir.string());
  expectError(r, 2, "train-images-idx3-ubyte");  // a bad file is bad input
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST(CliErrors, NanLossNamesTheStepAndWritesNoCheckpoint) {
  fs::path ckpt = fs::path(tempDir()) / "never.safetensors";
  auto r = runDtrain(kQuick + "--lr 1e30 --max-steps 50 --save " + ckpt.string());
  expectError(r, 1, "at step");
  EXPECT_NE(r.err.find("in the optimisation (its input is finite); try a lower --lr"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(ckpt));
}

// dtrain's checkpoints name their model: loading one into another says which.
TEST(CliErrors, CheckpointOfAnotherModel) {
  fs::path ckpt = fs::path(tempDir()) / "mlp.safetensors";
  auto ok = runDtrain(kQuick + "--model mlp --save " + ckpt.string());
  ASSERT_EQ(ok.code, 0) << ok.err;
  expectError(runDtrain(kQuick + "--model lenet --load " + ckpt.string()), 2,
              "--load " + ckpt.string() + " holds a mlp checkpoint, not lenet");
}

// A file that does not name its model (a torch state_dict): the first tensor
// that does not fit, with both shapes.
TEST(CliErrors, UnnamedCheckpointOfAnotherShapeNamesTheTensor) {
  fs::path ckpt = fs::path(tempDir()) / "torch.safetensors";
  std::vector<std::pair<std::string, dtrain::Tensor>> tensors{
      {"1.weight", dtrain::Tensor::zeros({128, 784})}, {"1.bias", dtrain::Tensor::zeros({128})},
      {"3.weight", dtrain::Tensor::zeros({256, 128})}, {"3.bias", dtrain::Tensor::zeros({256})},
      {"5.weight", dtrain::Tensor::zeros({10, 256})},  {"5.bias", dtrain::Tensor::zeros({10})}};
  dtrain::runtime::saveSafetensors(ckpt.string(), tensors);
  expectError(runDtrain(kQuick + "--model mlp --load " + ckpt.string()), 1,
              "parameter 1.weight has shape [128, 784], model expects [256, 784]");
}

// Inputs that are not there: exit 2 naming the flag and the path, as --resume does.
TEST(CliErrors, MissingOrCorruptCheckpoint) {
  expectError(runDtrain(kQuick + "--load /nonexistent.safetensors"), 2,
              "--load /nonexistent.safetensors: no such checkpoint file");
  expectError(runDtrain(kQuick + "--resume /nonexistent.safetensors"), 2,
              "--resume /nonexistent.safetensors");
  expectError(runDtrain(kQuick + "--lora-rank 2 --load-adapters /nonexistent.safetensors"), 2,
              "--load-adapters /nonexistent.safetensors: no such checkpoint file");
  fs::path bad = fs::path(tempDir()) / "bad.safetensors";
  std::ofstream(bad) << "not a checkpoint at all";
  expectError(runDtrain(kQuick + "--load " + bad.string()), 1, bad.string());
}

// Every file written at the end (or along the way) is checked before the first
// step: exit 2 naming the flag and the path, no result line, nothing written.
TEST(CliErrors, UnwritableOutputsFailBeforeTraining) {
  const std::string missing = "/nonexistent/dir/x";
  for (const std::string flag : {"--save", "--metrics", "--timeline"})
    expectError(runDtrain(kQuick + flag + " " + missing), 2, flag + " " + missing);
  expectError(runDtrain(kQuick + "--lora-rank 2 --save-adapters " + missing), 2,
              "--save-adapters " + missing);
  // A directory where a file belongs, and a checkpoint directory that cannot be made.
  const std::string dir = tempDir();
  expectError(runDtrain(kQuick + "--save " + dir), 2, "--save " + dir + ": is a directory");
  const std::string blocker = dir + "/file";
  std::ofstream(blocker) << "x";
  expectError(runDtrain(kQuick + "--checkpoint-every 1 --checkpoint-dir " + blocker + "/ckpt"), 2,
              "--checkpoint-dir " + blocker + "/ckpt");
  // The current directory is a directory too: a bare name is fine.
  auto ok = runShell("cd " + dir + " && " + std::string(DTRAIN_BIN) + " " + kQuick + "--save x.safetensors");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "x.safetensors"));
}
