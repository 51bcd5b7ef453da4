#pragma once
// Writes a classification data set as WebDataset-style shards (dtrain data pack): files
// PREFIX-000000.tar, PREFIX-000001.tar, ... of `shardSize` samples each (the last may hold
// fewer), sample i as members "<i, 9 digits>.npy" (its features) and ".cls" (its label).
// A sample whose every value is some k / 255 (images read from IDX or uint8 .npy) is
// stored as uint8, which the reader scales back to the same floats; others as float32.
#include <cstdint>
#include <string>
#include <vector>

#include "data/Dataset.h"

namespace dtrain::data {

struct PackResult {
  std::vector<std::string> files;
  int64_t samples = 0;
  int64_t bytes = 0;
  std::string pattern;  // "PREFIX-{000000..000011}.tar": what --train-data takes
};

PackResult packShards(const Dataset& dataset, const std::string& prefix, int64_t shardSize);

// An image folder (data/ImageFolder.h: DIR/<class>/*) as shards of its files' bytes as they
// are (members "<i>.jpg" or ".png", and ".cls"), in a seeded random order so that every
// shard mixes the classes; the loader decodes them (--image-size). Each image's header is
// checked first: BadData naming a file that is not a JPEG or PNG.
PackResult packImageFolder(const std::string& dir, const std::string& prefix, int64_t shardSize);

// The name of shard `index` of `prefix`.
std::string shardName(const std::string& prefix, int64_t index);

}  // namespace dtrain::data
