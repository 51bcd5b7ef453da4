#pragma once
// A set of shards (data/ShardReader.h) as a training or test set: the files, how many good
// samples each holds, the samples' shape and the classes. Made by one scan of the files
// before training that reads the tar headers, the labels and the feature headers (never the
// feature data), so that a broken file fails before the first step, every rank knows how
// many steps an epoch has, and the model is built for the right shape.
//
// An image folder (--dataset imagefolder, data/ImageFolder.h) is a set too: its files,
// dealt once in a seeded random order into groups that stand for shards, so that ranks,
// loader threads, the shuffle and resume treat both alike.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/Dataset.h"
#include "data/ShardReader.h"

namespace dtrain::data {

struct FolderImage {
  std::string path;
  int32_t label = 0;
};

struct ShardFile {
  std::string path;        // a tar file, or for a group of a folder's images its first image
  int64_t samples = 0;     // good samples
  int64_t badSamples = 0;  // skipped (skipBad), a broken archive's rest counted as one
  std::vector<FolderImage> images;  // a group of a folder's images (empty for a tar file)
};

// One shard's samples in order; next() throws BadData for a bad sample and goes on with
// the next one at the next call.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual bool next(Sample& out) = 0;
};

class ShardSet {
 public:
  // Scans `files`. A bad sample throws its BadData unless `skipBad`, which counts it.
  // `expected` (a test set's: the training set's spec) fixes the shape and the classes.
  // `images` says how .jpg/.png members become samples (data/ImageSample.h).
  static std::shared_ptr<const ShardSet> scan(const std::vector<std::string>& files, bool skipBad,
                                              const DatasetSpec& expected = {},
                                              const ImageOptions& images = {});
  // The images of a folder (data/ImageFolder.h), dealt into groups of `groupSize`; a test
  // set passes its training set (`train`), whose class names it uses.
  static std::shared_ptr<const ShardSet> scanFolder(const std::string& dir, bool skipBad,
                                                    const ImageOptions& images, uint64_t seed,
                                                    const ShardSet* train = nullptr);

  const std::vector<ShardFile>& files() const { return files_; }
  const DatasetSpec& spec() const { return spec_; }
  int64_t samples() const { return samples_; }
  // The scan's and those found since: images whose body does not decode.
  int64_t badSamples() const { return badSamples_ + undecodable_.load(); }
  void countUndecodable() const { ++undecodable_; }
  bool skipBad() const { return skipBad_; }
  const ImageOptions& imageOptions() const { return images_; }
  bool holdsImages() const { return holdsImages_; }
  const std::vector<std::string>& classNames() const { return classNames_; }  // folders

  // Shard `index`'s samples; `checkOnly` as ShardReader::decode (the scan's).
  std::unique_ptr<SampleSource> open(size_t index, const ImageDecoding& decoding,
                                     bool checkOnly = false) const;

  // Throws BadData unless `s` has the set's shape and one of its classes (the same check
  // the scan made, so a stream skips exactly the samples the scan counted as bad).
  void check(const Sample& s, const std::string& file) const;

  // The fewest samples any of `worldSize` ranks can be given in an epoch (data/ShardStream.h
  // deals each rank every worldSize-th shard of a shuffled order): the sum of the
  // floor(S / worldSize) smallest shards. UsageError when there are fewer shards than ranks.
  int64_t minSamplesPerRank(int worldSize) const;

 private:
  void scanFiles(const std::string& what);

  std::vector<ShardFile> files_;
  DatasetSpec spec_;
  int64_t samples_ = 0, badSamples_ = 0;
  mutable std::atomic<int64_t> undecodable_{0};
  bool skipBad_ = false;
  ImageOptions images_;
  bool holdsImages_ = false;
  std::vector<std::string> classNames_;
};

}  // namespace dtrain::data
