#pragma once
// An image's bytes (a .jpg/.png shard member or a file of an image folder) as a sample's
// features [3, S, S]: decoded (data/ImageCodec.h) and transformed (data/ImageTransform.h)
// in the loader thread that reads it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/ShardReader.h"

namespace dtrain::data {

// The first bytes of an image a scan reads: enough for a JPEG's header past its EXIF.
inline constexpr int64_t kImageHeaderBytes = 64 * 1024;

// A scan checks an image's header only; an image that turns out corrupt in its body is
// found when it is decoded, in training. This is that error, so that --skip-bad-samples
// counts it then (the scan could not).
class UndecodableImage : public BadData {
 public:
  using BadData::BadData;
};

// Fills out.shape, out.image and, unless `checkOnly`, out.x. `whole`: the bytes are the
// whole image (a scan may have only a prefix). `file`/`member` name it in errors (member ""
// for a file of its own). BadData (UndecodableImage when decoding it failed), or UsageError
// without --image-size.
void decodeImageSample(const uint8_t* bytes, size_t size, bool whole, const ImageDecoding& images,
                       bool checkOnly, const std::string& file, const std::string& member,
                       Sample& out);

}  // namespace dtrain::data
