#pragma once
// JPEG (libjpeg-turbo's TurboJPEG API) and PNG (libpng's simplified API) to 8-bit RGB, and
// back (the tests and `dtrain data pack` write images with the same libraries). Every image
// becomes RGB, as torchvision's ImageFolder loader converts it: grey is repeated, alpha is
// dropped. Failures are ImageError with the library's message; the callers add the file.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain::data {

class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ImageFormat { Unknown, Jpeg, Png };

// From the first bytes (the magic numbers), not the file name.
ImageFormat sniffImage(const uint8_t* bytes, size_t size);

struct ImageSize {
  int64_t height = 0, width = 0;
};

// The dimensions from the header alone (a prefix of the file may do).
ImageSize readImageSize(const uint8_t* bytes, size_t size);

struct Image {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> rgb;  // height x width x 3
};

// The whole image; a truncated or corrupt one is an ImageError (libjpeg-turbo's warnings
// included: a silently grey half image would be a wrong sample).
Image decodeImage(const uint8_t* bytes, size_t size);

std::vector<uint8_t> encodePng(const Image& image);
std::vector<uint8_t> encodeJpeg(const Image& image, int quality = 90);

}  // namespace dtrain::data
