#pragma once
// `dtrain data pack`: writes a data set as shards that `dtrain train --dataset shards`
// streams (data/ShardPack.h):
//   dtrain data pack --idx DIR [--split train|test] --out PREFIX [--shard-size N]
//   dtrain data pack --npy FEATURES.npy --labels LABELS.npy --out PREFIX [--shard-size N]
// and prints one JSON line: the files, samples, bytes and the pattern for --train-data.
#include <CLI/CLI.hpp>

namespace dtrain::cli {

void addDataCommand(CLI::App& app);

}  // namespace dtrain::cli
