#pragma once
// Image folders written by the tests with the decoder's own libraries (data/ImageCodec.h):
// class k's images are noisy and mostly colour k (red, green, blue), of assorted sizes, so
// that a small CNN tells them apart and the resize and crop have work to do.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/Rng.h"
#include "data/ImageCodec.h"

namespace dtrain::data::test {

inline Image colourImage(int cls, Rng& rng, int64_t height, int64_t width) {
  Image img{height, width, std::vector<uint8_t>(static_cast<size_t>(height * width * 3))};
  for (size_t p = 0; p < img.rgb.size(); ++p) {
    const int base = static_cast<int>(p % 3) == cls ? 170 : 60;
    img.rgb[p] = static_cast<uint8_t>(base + static_cast<int>(rng.below(80)) - 40);
  }
  return img;
}

inline void writeFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

// DIR/<class>/<i>.jpg or .png (alternating): `perClass` images per class, 20 to 43 pixels a side.
inline std::vector<std::string> writeImageFolder(const std::string& dir, int perClass,
                                                 const std::vector<std::string>& classes,
                                                 uint64_t seed = 1) {
  Rng rng(seed);
  std::vector<std::string> paths;
  for (size_t c = 0; c < classes.size(); ++c)
    for (int i = 0; i < perClass; ++i) {
      const Image img = colourImage(static_cast<int>(c), rng, 20 + static_cast<int64_t>(rng.below(24)),
                                    20 + static_cast<int64_t>(rng.below(24)));
      const bool png = i % 2 == 1;
      paths.push_back(dir + "/" + classes[c] + "/" + std::to_string(i) + (png ? ".png" : ".jpg"));
      writeFileBytes(paths.back(), png ? encodePng(img) : encodeJpeg(img));
    }
  return paths;
}

}  // namespace dtrain::data::test
