// [model] and [data]: what is trained, on what.
#include "api/Schema.h"
#include "api/groups/Conditions.h"
#include "data/Augment.h"
#include "nn/ModelRegistry.h"
#include "runtime/StreamingData.h"

namespace dtrain::api {

bool isLanguageModel(const RunConfig& rc) {
  return nn::modelInfo(rc.train.model).task == nn::kLanguageModelTask;
}

void addModelOptions(Schema& s) {
  s.addGroup("model", "Model");
  s.add("model", "name", "--model", "Built-in model (gpt-*: byte-level language models)")
      .train(&runtime::TrainConfig::model)
      .oneOf([] { return nn::registeredModelNames(); })
      .result("model");
  auto gptOnly = [](const RunConfig& rc) {
    return unlessThen(isLanguageModel(rc), "applies to the gpt-* models");
  };
  s.add("model", "n_layer", "--n-layer", "gpt: transformer blocks (overrides the preset)")
      .train(&runtime::TrainConfig::nLayer).range(1).when(gptOnly);
  s.add("model", "n_head", "--n-head", "gpt: attention heads (overrides the preset)")
      .train(&runtime::TrainConfig::nHead).range(1).when(gptOnly);
  s.add("model", "n_embd", "--n-embd", "gpt: embedding width (overrides the preset)")
      .train(&runtime::TrainConfig::nEmbd).range(1).when(gptOnly);
  s.add("model", "block_size", "--block-size", "gpt: context length (overrides the preset)")
      .train(&runtime::TrainConfig::blockSize).range(1).when(gptOnly);
  s.add("model", "mlp_hidden", "--mlp-hidden", "mlp: hidden layer widths, e.g. 2048,2048 (default 256,256)")
      .train(&runtime::TrainConfig::mlpHidden).range(1).result("mlp_hidden")
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.model == "mlp", "applies to --model mlp");
      });
}

void addDataOptions(Schema& s) {
  s.addGroup("data", "Data");
  s.add("data", "name", "--dataset",
        "fashion-mnist, synthetic, idx (any MNIST-format --data-dir), npy (your .npy files: "
        "--train-data ...), shards (tar shards streamed: --train-data 'DIR/train-{0000..0127}.tar') "
        "or imagefolder (--data-dir D: D/train/<class>/*.jpg, D/val/<class>/*.jpg) for classifiers; text (gpt-*: their default) or tokens (uint16 .bin token shards)")
      .train(&runtime::TrainConfig::dataset)
      .oneOf([] {
        std::vector<std::string> names{"fashion-mnist", "synthetic", "idx", "npy", "text"};
        for (std::string& n : runtime::streamingDatasetNames()) names.push_back(std::move(n));
        return names;
      })
      .result("dataset");
  s.add("data", "dir", "--data-dir",
        "Directory of the IDX files (fashion-mnist, idx) or of the train and val image folders (imagefolder)")
      .train(&runtime::TrainConfig::dataDir)
      .when([](const RunConfig& rc) {
        const auto& d = rc.train.dataset;
        return unlessThen(d == "fashion-mnist" || d == "idx" || d == "imagefolder",
                          "applies to --dataset fashion-mnist, idx and imagefolder");
      });
  auto imagesRead = [](const RunConfig& rc) {
    const auto& d = rc.train.dataset;
    return unlessThen(d == "imagefolder" || d == "shards", "applies to images: --dataset imagefolder and shards");
  };
  s.add("data", "image_size", "--image-size",
        "Images: the side S of the [3, S, S] input they become (resize the shorter side, centre "
        "crop; training with --augment resized-crop: a random region)")
      .train(&runtime::TrainConfig::imageSize).range(0, 8192).result("image_size").when(imagesRead);
  s.add("data", "normalize", "--normalize",
        "Images: (x / 255 - mean) / std, as mean,std or three means then three stds "
        "(0.485,0.456,0.406,0.229,0.224,0.225); default x / 255")
      .train(&runtime::TrainConfig::normalize).when(imagesRead);
  // --dataset npy (docs/guide/your-data.md): the model's input and classes come from these.
  auto npyOnly = [](const RunConfig& rc) {
    return unlessThen(rc.train.dataset == "npy", "applies to --dataset npy");
  };
  auto streamed = [](const RunConfig& rc) { return runtime::streamingDataset(rc.train.dataset) != nullptr; };
  auto filesGiven = [streamed](const RunConfig& rc) {
    return unlessThen(rc.train.dataset == "npy" || streamed(rc), "applies to --dataset npy, shards and tokens");
  };
  auto streamedOnly = [](const RunConfig& rc) {
    const runtime::StreamingDataset* kind = runtime::streamingDataset(rc.train.dataset);
    return unlessThen(kind && kind->streamsSamples, "applies to --dataset shards and imagefolder");
  };
  s.add("data", "train_data", "--train-data",
        "npy: training features [N, ...], float32/float64 (kept as they are) or uint8 (scaled to "
        "x/255); shards, tokens: the shard files, brace ranges and globs ('DIR/train-{0000..0127}.tar')")
      .train(&runtime::TrainConfig::trainData).when(filesGiven);
  s.add("data", "train_labels", "--train-labels",
        "npy: training labels [N], int64/int32/uint8 class indices 0, 1, ...")
      .train(&runtime::TrainConfig::trainLabels).when(npyOnly);
  s.add("data", "test_data", "--test-data",
        "npy: test features (without --test-data/--test-labels: no test evaluation); shards: the "
        "test shards ('DIR/test-*.tar')")
      .train(&runtime::TrainConfig::testData).when(filesGiven);
  s.add("data", "loader_threads", "--loader-threads",
        "Streamed datasets: threads per rank that read and decode shards ahead of training")
      .train(&runtime::TrainConfig::loaderThreads).range(1, 64).result("loader_threads").when(streamedOnly);
  s.add("data", "shuffle_buffer", "--shuffle-buffer",
        "Streamed datasets: samples each rank holds to draw its batches from at random "
        "(0: the shards' order; the shard order is shuffled every epoch either way)")
      .train(&runtime::TrainConfig::shuffleBuffer).range(0).result("shuffle_buffer")
      .when([streamedOnly](const RunConfig& rc) {
        const std::string why = streamedOnly(rc);
        return !why.empty() ? why : unlessThen(rc.train.shuffle, "applies unless --no-shuffle");
      });
  s.add("data", "skip_bad_samples", "--skip-bad-samples",
        "Streamed datasets: count and skip samples that do not decode (bad_samples in the "
        "result) instead of stopping with an error naming the file")
      .train(&runtime::TrainConfig::skipBadSamples).when(streamedOnly);
  s.add("data", "test_labels", "--test-labels", "npy: test labels")
      .train(&runtime::TrainConfig::testLabels).when(npyOnly);
  s.add("data", "text_file", "--text-file",
        "--dataset text: train on this file's bytes (default: the King James Bible, kjv)")
      .train(&runtime::TrainConfig::textFile)
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.dataset == "text", "applies to --dataset text");
      });
  s.add("data", "synthetic_size", "--synthetic-size", "Training samples of --dataset synthetic")
      .train(&runtime::TrainConfig::syntheticSize)
      .range(1)
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.dataset == "synthetic", "applies to --dataset synthetic");
      });
  s.add("data", "shuffle", "", "Take batches in file order (default: shuffled every epoch from --seed)")
      .train(&runtime::TrainConfig::shuffle)
      .negated("--no-shuffle");
  s.add("data", "prefetch", "--prefetch", "Batches loaded ahead on a background thread (0: none)")
      .train(&runtime::TrainConfig::prefetch)
      .range(0);
  s.add("data", "augment", "--augment",
        "Training images: crop (random crop of the 4-pixel zero-padded image), flip "
        "(horizontal, p 1/2), or crop,flip; seeded by --seed, the step and the sample's place "
        "in the global batch. Decoded images (imagefolder, .jpg/.png shards): resized-crop "
        "(RandomResizedCrop), flip; seeded by --seed, the epoch and the file")
      .train(&runtime::TrainConfig::augment)
      .when([](const RunConfig& rc) {
        return unlessThen(!isLanguageModel(rc), "applies to image classification, not language models");
      })
      .set = [](RunConfig& rc, const Value& v) {
        const auto& spec = std::get<std::string>(v);
        data::parseAugment(spec);  // names the choices
        rc.train.augment = spec;
      };
}

}  // namespace dtrain::api
