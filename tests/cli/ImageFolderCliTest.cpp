// Images through the dtrain command: --dataset imagefolder on a folder the test writes
// (JPEG and PNG, assorted sizes, three colour classes) learnt by lenet, the same folder
// packed into shards of .jpg/.png members, and the flags and bad images answered in one line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "data/ImageTestData.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

nlohmann::json finalJson(const CliResult& r) { return nlohmann::json::parse(r.lastLine()); }

struct ColourFolder {
  std::string dir = tempDir();
  ColourFolder() {
    data::test::writeImageFolder(dir + "/train", 40, {"blue", "green", "red"}, 1);
    data::test::writeImageFolder(dir + "/val", 10, {"blue", "green", "red"}, 2);
  }
  std::string flags(const std::string& model = "lenet") const {
    return "train --model " + model + " --progress off --threads 1 --batch-size 16 --lr 0.02 "
           "--dataset imagefolder --image-size 28 --data-dir " + dir + " ";
  }
};

}  // namespace

TEST(ImageFolderCli, LenetLearnsColourClassesFromJpegAndPng) {
  ColourFolder f;
  auto r = runDtrain(f.flags() + "--epochs 4 --loader-threads 2 --augment resized-crop,flip "
                     "--normalize 0.5,0.5");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = finalJson(r);
  EXPECT_EQ(j["dataset"], "imagefolder");
  EXPECT_EQ(j["image_size"], 28);
  EXPECT_EQ(j["bad_samples"], 0);
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.6) << r.lastLine();  // chance: 1/3
}

TEST(ImageFolderCli, PackedFolderTrainsAsImageShards) {
  ColourFolder f;
  auto r = runDtrain("data pack --image-folder " + f.dir + "/train --out " + f.dir + "/sh/train --shard-size 30");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(finalJson(r)["shards"], 4);
  EXPECT_EQ(finalJson(r)["samples"], 120);
  ASSERT_EQ(runDtrain("data pack --image-folder " + f.dir + "/val --out " + f.dir + "/sh/val").code, 0);
  r = runDtrain("train --model mlp --progress off --threads 1 --epochs 2 --batch-size 16 --dataset shards "
                "--image-size 12 --train-data '" + f.dir + "/sh/train-*.tar' --test-data " + f.dir +
                "/sh/val-000000.tar --workers 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(finalJson(r)["test_accuracy"].get<double>(), 0.6) << r.lastLine();
  expectError(runDtrain("train --model mlp --dataset shards --train-data '" + f.dir + "/sh/train-*.tar'"), 2,
              "an image; give --image-size S");
}

TEST(ImageFolderCli, BadImageIsOneLineNamingTheFileOrCounted) {
  ColourFolder f;
  const std::string junk = f.dir + "/train/red/broken.png";
  std::ofstream(junk) << "\x89PNG\r\n\x1a\n and then nothing";
  const std::string run = f.flags("mlp") + "--epochs 1 ";
  expectError(runDtrain(run), 2, junk + ": PNG: no IHDR header");
  auto r = runDtrain(run + "--skip-bad-samples");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(finalJson(r)["bad_samples"], 1);
}

TEST(ImageFolderCli, FlagsAreCheckedWithOneLine) {
  ColourFolder f;
  expectError(runDtrain("train --model mlp --dataset imagefolder --data-dir " + f.dir), 2,
              "--dataset imagefolder needs --image-size S");
  expectError(runDtrain("train --model mlp --image-size 28"), 2, "--image-size applies to images");
  expectError(runDtrain(f.flags() + "--normalize 0.5"), 2, "--normalize '0.5': 1 values");
  expectError(runDtrain(f.flags() + "--image-size 32"), 2, "--model lenet takes 1x28x28 or 3x28x28 images");
  expectError(runDtrain("train --model mlp --dataset synthetic --augment resized-crop"), 2,
              "--augment resized-crop applies to images the loader decodes");
  expectError(runDtrain("train --model mlp --dataset imagefolder --image-size 8 --data-dir " + f.dir + "/none"), 2,
              f.dir + "/none/train: not a folder");
}
