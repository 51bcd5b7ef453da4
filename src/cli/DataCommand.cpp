#include "cli/DataCommand.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/Error.h"
#include "data/FashionMnist.h"
#include "data/NpyDataset.h"
#include "data/ShardPack.h"
#include "data/TextCorpus.h"
#include "data/TokenShards.h"

namespace dtrain::cli {
namespace {

struct PackFlags {
  std::string idx, split, npy, text, labels, imageFolder, out;
  int64_t shardSize = 0;  // 0: the kind's default
};

// The data set the flags name, loaded whole (packing reads every sample once).
std::shared_ptr<const data::Dataset> packSource(const PackFlags& f) {
  DTRAIN_CHECK_USAGE(f.idx.empty() != f.npy.empty(),
                     "dtrain data pack: give one source: --idx DIR, --npy FEATURES.npy --labels "
                     "LABELS.npy, --image-folder DIR or --text FILE");
  if (!f.idx.empty()) {
    DTRAIN_CHECK_USAGE(f.labels.empty(), "dtrain data pack: --labels applies to --npy (IDX "
                       "directories hold their labels)");
    const bool train = f.split != "test";
    if (train) return data::loadIdxDirectory(f.idx, true);
    return data::loadIdxDirectory(f.idx, false, data::idxDirectorySpec(f.idx));
  }
  DTRAIN_CHECK_USAGE(f.split.empty(), "dtrain data pack: --split applies to --idx (pack the "
                     "test .npy files with a second --npy ... --labels ...)");
  DTRAIN_CHECK_USAGE(!f.labels.empty(), "dtrain data pack --npy needs --labels LABELS.npy");
  return data::loadNpyDataset({f.npy, f.labels, "--npy " + f.npy, "--labels " + f.labels});
}

// --text FILE: the file's bytes as uint16 tokens (vocabulary 256), --shard-size tokens a file.
void packText(const PackFlags& f) {
  DTRAIN_CHECK_USAGE(f.idx.empty() && f.npy.empty() && f.labels.empty() && f.split.empty(),
                     "dtrain data pack: --text takes no other source (--idx, --npy, --labels, --split)");
  const auto corpus = data::TextCorpus::fromFile(f.text);
  const std::vector<uint8_t> bytes(corpus->bytes().begin(), corpus->bytes().end());
  const auto files = data::packTextTokens(bytes, f.out, f.shardSize ? f.shardSize : int64_t{1} << 26);
  std::cout << nlohmann::json{{"shards", files.size()},
                              {"tokens", bytes.size()},
                              {"vocab_size", 256},
                              {"pattern", f.out + "-*.bin"}}
                   .dump()
            << std::endl;
}

void pack(const PackFlags& f) {
  DTRAIN_CHECK_USAGE(!f.out.empty(), "dtrain data pack needs --out PREFIX (files PREFIX-000000.tar ...)");
  if (!f.text.empty()) return packText(f);
  const int64_t shardSize = f.shardSize ? f.shardSize : 10000;
  data::PackResult r;
  if (!f.imageFolder.empty()) {
    DTRAIN_CHECK_USAGE(f.idx.empty() && f.npy.empty() && f.labels.empty() && f.split.empty(),
                       "dtrain data pack: --image-folder takes no other source (--idx, --npy, "
                       "--labels, --split); pack DIR/train and DIR/val one after the other");
    r = data::packImageFolder(f.imageFolder, f.out, shardSize);
  } else {
    r = data::packShards(*packSource(f), f.out, shardSize);
  }
  std::cout << nlohmann::json{{"shards", r.files.size()},
                              {"samples", r.samples},
                              {"bytes", r.bytes},
                              {"pattern", r.pattern}}
                   .dump()
            << std::endl;
}

}  // namespace

void addDataCommand(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Prepare data sets for streaming (dtrain data pack)");
  data->require_subcommand(1);
  auto flags = std::make_shared<PackFlags>();
  auto* p = data->add_subcommand("pack", "Write a data set as tar shards for --dataset shards");
  p->add_option("--idx", flags->idx, "An MNIST-format directory (e.g. /usr/share/datasets/fashion-mnist)");
  p->add_option("--split", flags->split, "--idx: train (default) or test")->check(CLI::IsMember({"train", "test"}));
  p->add_option("--npy", flags->npy, "Features [N, ...] (.npy: float32, float64 or uint8)");
  p->add_option("--labels", flags->labels, "Labels [N] (.npy, with --npy)");
  p->add_option("--image-folder", flags->imageFolder,
                 "A folder of class folders (DIR/<class>/*.jpg, .png): the images as they are, "
                 "decoded in training (--image-size)");
  p->add_option("--text", flags->text, "A text file: its bytes as token shards PREFIX-000000.bin ... (--dataset tokens)");
  p->add_option("--out", flags->out, "Output prefix: PREFIX-000000.tar, PREFIX-000001.tar, ...");
  p->add_option("--shard-size", flags->shardSize, "Samples per shard (default 10000; --text: tokens per file, default 2^26)")
      ->check(CLI::PositiveNumber);
  p->callback([flags] { pack(*flags); });
}

}  // namespace dtrain::cli
