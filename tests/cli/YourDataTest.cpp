// Training on the user's own files through the dtrain command: --dataset npy
// (.npy features and labels) and --dataset idx (an MNIST-format directory),
// the model built for the data's shape on every strategy, and every bad file
// or flag answered with one line and exit code 2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "data/NpyTestData.h"
#include "runtime/Safetensors.h"

using namespace dtrain;
using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {

// Two-blob tables in a fresh directory: train (2000 samples) and test (500).
struct BlobFiles {
  std::string dir = tempDir();
  BlobFiles() {
    writeBlobs(dir + "/train_", 2000, 1);
    writeBlobs(dir + "/test_", 500, 2);
  }
  std::string trainFlags() const {
    return "--dataset npy --train-data " + dir + "/train_x.npy --train-labels " + dir +
           "/train_y.npy ";
  }
  std::string flags() const {
    return trainFlags() + "--test-data " + dir + "/test_x.npy --test-labels " + dir +
           "/test_y.npy ";
  }
};

const std::string kRun = "train --model mlp --progress off --epochs 5 ";  // 155 steps of 64

nlohmann::json lastJson(const CliResult& r) { return nlohmann::json::parse(r.lastLine()); }

// mlp on 2 features and 2 classes: Linear(2,256), Linear(256,256), Linear(256,2).
constexpr int64_t kBlobMlpParameters = 2 * 256 + 256 + 256 * 256 + 256 + 256 * 2 + 2;

}  // namespace

TEST(YourData, MlpLearnsTwoBlobsFromNpyFiles) {
  BlobFiles f;
  const std::string ckpt = f.dir + "/blobs.safetensors";
  auto r = runDtrain(kRun + f.flags() + "--save " + ckpt);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = lastJson(r);
  EXPECT_EQ(j["dataset"], "npy");
  EXPECT_EQ(j["parameters"], kBlobMlpParameters);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.9) << r.lastLine();
  // The checkpoint keeps the PyTorch nn.Sequential names, with the data's shapes.
  auto st = runtime::loadSafetensors(ckpt);
  ASSERT_NE(st.find("1.weight"), nullptr);
  ASSERT_NE(st.find("5.weight"), nullptr);
  EXPECT_EQ(st.find("1.weight")->shape(), (Shape{256, 2}));
  EXPECT_EQ(st.find("5.weight")->shape(), (Shape{2, 256}));
  EXPECT_EQ(st.find("5.bias")->shape(), (Shape{2}));
}

TEST(YourData, TwoAllreduceWorkersOnNpyFiles) {
  BlobFiles f;
  auto r = runDtrain(kRun + f.flags() + "--workers 2");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = lastJson(r);
  EXPECT_EQ(j["strategy"], "allreduce");
  EXPECT_EQ(j["workers"], 2);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.9) << r.lastLine();
}

TEST(YourData, ParameterServersBuildTheWorkersShapes) {
  // The server rank builds its model from the data's shape too: a mismatch
  // would fail the workers' first push.
  BlobFiles f;
  auto r = runDtrain(kRun + f.flags() + "--strategy ps --servers 1 --workers 2");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = lastJson(r);
  EXPECT_EQ(j["parameters"], kBlobMlpParameters);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.9) << r.lastLine();
}

TEST(YourData, EveryStrategyBuildsItsModelsForTheData) {
  BlobFiles f;
  for (const std::string strategy :
       {"--pipeline-stages 2", "--tensor-parallel 2", "--tensor-parallel 2 --tensor-parallel-style "
        "krizhevsky", "--strategy hogwild --workers 2", "--zero 3 --workers 2",
        "--strategy ps --servers 2 --workers 2 --consistency async"}) {
    auto r = runDtrain(kRun + f.flags() + strategy);
    ASSERT_EQ(r.code, 0) << strategy << ": " << r.err;
    EXPECT_GT(lastJson(r)["test_accuracy"].get<double>(), 0.9) << strategy << ": " << r.lastLine();
  }
  // Federated averaging: the server's and the clients' models.
  auto r = runDtrain("train --model mlp --progress off --strategy fedavg " + f.flags());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(lastJson(r)["test_accuracy"].get<double>(), 0.9) << r.lastLine();
}

TEST(YourData, WithoutTestFilesThereIsNoTestEvaluation) {
  BlobFiles f;
  auto r = runDtrain(kRun + f.trainFlags() + "--progress lines --eval-every 50");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("on npy (2000 samples of [2], 2 classes)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step 50: no test set (--test-data and --test-labels not given)"),
            std::string::npos)
      << r.err;
  auto j = lastJson(r);
  EXPECT_FALSE(j.contains("test_accuracy")) << r.lastLine();
  EXPECT_FALSE(j.contains("test_loss")) << r.lastLine();
  EXPECT_TRUE(j.contains("train_loss"));
}

TEST(YourData, IdxDirectoryWrittenByTheTest) {
  const std::string dir = tempDir();
  writeBandsIdx(dir, "train", 1200, 9, 1);
  writeBandsIdx(dir, "t10k", 300, 9, 2);
  auto r = runDtrain(kRun + "--dataset idx --data-dir " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = lastJson(r);
  EXPECT_EQ(j["dataset"], "idx");
  EXPECT_EQ(j["parameters"], 81 * 256 + 256 + 256 * 256 + 256 + 256 * 3 + 3);  // 9x9, 3 classes
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.9) << r.lastLine();
  // lenet is built for 28x28 images only.
  expectError(runDtrain("train --model lenet --progress off --dataset idx --data-dir " + dir), 2,
              "--model lenet takes 1x28x28 or 3x28x28 images; the data's samples have shape [1, 9, 9]");
}

TEST(YourData, FlagsThatDoNotGoTogether) {
  BlobFiles f;
  expectError(
      runDtrain("train --progress off --dataset synthetic --train-data " + f.dir + "/train_x.npy"),
      2, "--train-data applies to --dataset npy (got --dataset synthetic)");
  expectError(runDtrain("train --progress off --test-labels y.npy"), 2,
              "--test-labels applies to --dataset npy (got --dataset fashion-mnist)");
  expectError(runDtrain("train --progress off --dataset npy --train-data x.npy"), 2,
              "--dataset npy needs --train-data FEATURES.npy and --train-labels LABELS.npy");
  expectError(runDtrain(kRun + f.trainFlags() + "--test-data " + f.dir + "/test_x.npy"), 2,
              "--test-data and --test-labels go together (got only --test-data)");
  expectError(runDtrain("train --progress off --model gpt-tiny " + f.flags()), 2,
              "--model gpt-tiny is a language model");
  expectError(runDtrain("train --progress off --model lenet " + f.flags()), 2,
              "--model lenet takes 1x28x28 or 3x28x28 images; the data's samples have shape [2]");
}

// NaN or infinity in the features: named at load (the file and the first bad
// value), not steps later as a NaN loss.
TEST(YourData, NonFiniteFeaturesAreNamedAtLoad) {
  const std::string d = tempDir();
  writeNpyOf(d + "/y.npy", "<i8", {3}, std::vector<int64_t>{0, 1, 0});
  writeNpyOf(d + "/nan.npy", "<f4", {3, 2}, std::vector<float>{1, 2, 3, NAN, 5, INFINITY});
  expectError(runDtrain(kRun + "--dataset npy --train-data " + d + "/nan.npy --train-labels " + d + "/y.npy"), 2,
              "--train-data " + d + "/nan.npy: sample 1 holds NaN at feature 1 (flat index 3); input "
              "features must be finite numbers");
  writeNpyOf(d + "/inf.npy", "<f8", {3, 2}, std::vector<double>{1, 2, 3, 4, 5, -INFINITY});
  expectError(runDtrain(kRun + "--dataset npy --train-data " + d + "/inf.npy --train-labels " + d + "/y.npy"), 2,
              "sample 2 holds -inf at feature 1 (flat index 5)");
  fs::remove_all(d);
}

TEST(YourData, BadFilesGetOneLineAndExitCode2) {
  BlobFiles f;
  const std::string d = f.dir;
  // A missing file: the flag and the path.
  expectError(runDtrain(kRun + f.trainFlags() + "--test-data " + d + "/nope.npy --test-labels " +
                        d + "/test_y.npy"),
              2, "--test-data " + d + "/nope.npy: no such file");
  // Wrong magic.
  std::ofstream(d + "/text.npy") << "a,b\n1,2\n";
  expectError(runDtrain(kRun + "--dataset npy --train-data " + d + "/text.npy --train-labels " + d +
                        "/train_y.npy"),
              2, "--train-data " + d + "/text.npy: not a .npy file (bad magic");
  // Truncated data.
  const std::vector<float> five(5, 1.0f);
  data::writeNpy(d + "/short.npy", "<f4", {3, 2}, five.data(), 20);
  expectError(runDtrain(kRun + "--dataset npy --train-data " + d + "/short.npy --train-labels " +
                        d + "/train_y.npy"),
              2, "short.npy: truncated: shape (3, 2) of '<f4' needs 24 bytes of data, found 20");
  // An unsupported dtype.
  writeNpyOf(d + "/half.npy", "<f2", {2, 2}, std::vector<uint16_t>{1, 2, 3, 4});
  expectError(runDtrain(kRun + "--dataset npy --train-data " + d + "/half.npy --train-labels " + d +
                        "/train_y.npy"),
              2, "unsupported feature dtype '<f2'");
  // A negative label.
  writeNpyOf(d + "/neg.npy", "<i8", {2}, std::vector<int64_t>{1, -3});
  writeNpyOf(d + "/two.npy", "<f4", {2, 2}, std::vector<float>{1, 2, 3, 4});
  expectError(runDtrain(kRun + "--dataset npy --train-data " + d + "/two.npy --train-labels " + d +
                        "/neg.npy"),
              2, "--train-labels " + d + "/neg.npy: label -3 of sample 1 is negative");
  // Labels that disagree with the features in number.
  expectError(runDtrain(kRun + "--dataset npy --train-data " + d + "/two.npy --train-labels " + d +
                        "/train_y.npy"),
              2, "train_y.npy has 2000 labels but --train-data " + d + "/two.npy has 2 samples");
  // Test samples of another shape than the training samples'.
  writeNpyOf(d + "/three.npy", "<f4", {500, 3}, std::vector<float>(1500, 0.0f));
  expectError(
      runDtrain(kRun + f.trainFlags() + "--test-data " + d + "/three.npy --test-labels " + d +
                "/test_y.npy"),
      2, "--test-data " + d + "/three.npy: samples of shape [3] but the training samples are [2]");
}
