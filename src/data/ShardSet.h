#pragma once
// A set of shards (data/ShardReader.h) as a training or test set: the files, how many good
// samples each holds, the samples' shape and the classes. Made by one scan of the files
// before training that reads the tar headers, the labels and the feature headers (never the
// feature data), so that a broken file fails before the first step, every rank knows how
// many steps an epoch has, and the model is built for the right shape.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/Dataset.h"
#include "data/ShardReader.h"

namespace dtrain::data {

struct ShardFile {
  std::string path;
  int64_t samples = 0;     // good samples
  int64_t badSamples = 0;  // skipped (skipBad), a broken archive's rest counted as one
};

class ShardSet {
 public:
  // Scans `files`. A bad sample throws its BadData unless `skipBad`, which counts it.
  // `expected` (a test set's: the training set's spec) fixes the shape and the classes.
  static std::shared_ptr<const ShardSet> scan(const std::vector<std::string>& files, bool skipBad,
                                              const DatasetSpec& expected = {});

  const std::vector<ShardFile>& files() const { return files_; }
  const DatasetSpec& spec() const { return spec_; }
  int64_t samples() const { return samples_; }
  int64_t badSamples() const { return badSamples_; }
  bool skipBad() const { return skipBad_; }

  // Throws BadData unless `s` has the set's shape and one of its classes (the same check
  // the scan made, so a stream skips exactly the samples the scan counted as bad).
  void check(const Sample& s, const std::string& file) const;

  // The fewest samples any of `worldSize` ranks can be given in an epoch (data/ShardStream.h
  // deals each rank every worldSize-th shard of a shuffled order): the sum of the
  // floor(S / worldSize) smallest shards. UsageError when there are fewer shards than ranks.
  int64_t minSamplesPerRank(int worldSize) const;

 private:
  std::vector<ShardFile> files_;
  DatasetSpec spec_;
  int64_t samples_ = 0, badSamples_ = 0;
  bool skipBad_ = false;
};

}  // namespace dtrain::data
