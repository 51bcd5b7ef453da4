#include "data/ImageSample.h"

namespace dtrain::data {
namespace {

// FNV-1a: the same sample key gives the same augmentation in every build and thread.
uint64_t keyHash(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace

void decodeImageSample(const uint8_t* bytes, size_t size, bool whole, const ImageDecoding& d,
                       bool checkOnly, const std::string& file, const std::string& member,
                       Sample& out) {
  const int64_t s = d.options.size;
  DTRAIN_CHECK_USAGE(s > 0, file, member.empty() ? "" : ": member " + member,
                     ": an image; give --image-size S (images are resized and cropped to S x S)");
  out.shape = {3, s, s};
  out.image = true;
  if (checkOnly) {
    try {
      readImageSize(bytes, size);
    } catch (const ImageError& e) {
      // A header past the prefix read is the decoder's to judge.
      if (whole || sniffImage(bytes, size) == ImageFormat::Unknown) throw BadData(file, member, e.what());
    }
    return;
  }
  try {
    readImageSize(bytes, size);
  } catch (const ImageError& e) {
    // The scan judged a header it read whole (and counted the image): the same BadData.
    if (static_cast<int64_t>(size) <= kImageHeaderBytes || sniffImage(bytes, size) == ImageFormat::Unknown)
      throw BadData(file, member, e.what());
    throw UndecodableImage(file, member, e.what());
  }
  try {
    const Image image = decodeImage(bytes, size);
    Rng rng(keyHash(out.key) ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(d.epoch + 1)) ^ d.seed);
    out.x.resize(static_cast<size_t>(3 * s * s));
    transformImage(image, d.options, rng, out.x.data());
  } catch (const ImageError& e) {
    throw UndecodableImage(file, member, e.what());
  }
}

}  // namespace dtrain::data
