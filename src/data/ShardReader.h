#pragma once
// Samples of one WebDataset-style shard: a tar file whose consecutive members with the
// same key (the member name up to the first '.' of its base name) form one sample, each
// member's extension naming what it holds:
//   .npy   the features: a NumPy array (float32, float64, or uint8 scaled to x / 255)
//   .cls   the class label: a decimal integer in text ("7")
//   .jpg, .jpeg, .png   the features: an image, decoded and transformed to [3, S, S]
//                 (data/ImageSample.h; needs --image-size S)
//   .txt, .json   metadata, read past
// Other extensions are bad samples.
//
// Two kinds of failure, both BadData naming the file and the member:
//  - a broken archive (truncated, bad header): the rest of the shard is unreadable, so
//    next() throws and the reader is finished;
//  - a bad sample (a member that does not decode, a missing label): decode() throws,
//    and the reader goes on with the next sample.
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "data/TarFile.h"
#include "data/ImageTransform.h"
#include "tensor/Tensor.h"

namespace dtrain::data {

struct ShardMember {
  std::string extension;       // "npy", "cls", ...
  int64_t size = 0;            // the member's bytes
  std::vector<uint8_t> bytes;  // all of them, or only a prefix (ShardReader::headersOnly)
};

struct RawSample {
  std::string key;
  std::vector<ShardMember> members;
};

struct Sample {
  std::string key;       // "<shard path>:<key>": unique over a shard set
  Shape shape;           // of x
  std::vector<float> x;
  int32_t label = -1;
  bool image = false;  // x was decoded from an image
  int64_t shard = -1;  // its shard's index in the set (set by data/ShardStream.h)
};

// How image members become samples: the transform, and what seeds its augmentation
// (the seed, the epoch and the sample's key, so a sample's crop does not depend on which
// loader thread decoded it).
struct ImageDecoding {
  ImageOptions options;
  uint64_t seed = 0;
  int64_t epoch = 0;
};

class ShardReader {
 public:
  // headersOnly: keep just the first bytes of each feature member (what checking its
  // header needs): the scan of data/ShardSet.h.
  explicit ShardReader(const std::string& path, bool headersOnly = false);

  // The next sample's members, or false at the shard's end (or after it broke).
  bool next(RawSample& sample);

  // The decoded sample; BadData when it is not one. `checkOnly` (headers only) checks
  // everything checkable from the headers and the sizes, and leaves x empty.
  // `images` configures image members (none: they are refused).
  Sample decode(const RawSample& sample, bool checkOnly = false,
                const ImageDecoding* images = nullptr) const;

  const std::string& path() const { return tar_.path(); }

 private:
  bool readMember();

  TarReader tar_;
  bool headersOnly_;
  bool finished_ = false;
  std::exception_ptr brokenAfter_;
  bool havePending_ = false;
  std::string pendingKey_;
  ShardMember pending_;
};

// The classes that .cls members may name are 0 .. kMaxShardClasses - 1.
inline constexpr int32_t kMaxShardClasses = 1 << 16;

}  // namespace dtrain::data
