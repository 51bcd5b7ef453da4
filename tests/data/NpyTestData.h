#pragma once
// .npy test inputs shared by the data and CLI tests: typed writers and a
// learnable table of two Gaussian blobs (no Python needed).
#include <cstdint>
#include <string>
#include <vector>

#include "core/Rng.h"
#include "data/IdxFile.h"
#include "data/NpyFile.h"

namespace dtrain::test {

template <typename T>
void writeNpyOf(const std::string& path, const std::string& descr,
                const std::vector<int64_t>& shape, const std::vector<T>& values, int major = 1) {
  data::writeNpy(path, descr, shape, values.data(), values.size() * sizeof(T), major);
}

// Two classes of 2-feature samples: class 0 around (-2, -2), class 1 around
// (2, 2), unit variance (the best possible accuracy is 99.8%).
struct Blobs {
  std::vector<float> x;    // n x 2
  std::vector<int64_t> y;  // n
};

inline Blobs twoBlobs(int64_t n, uint64_t seed) {
  Rng rng(seed);
  Blobs b;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(rng.below(2));
    const float centre = c == 1 ? 2.0f : -2.0f;
    b.x.push_back(centre + rng.normal());
    b.x.push_back(centre + rng.normal());
    b.y.push_back(c);
  }
  return b;
}

// prefix + "x.npy" (float32 [n, 2]) and prefix + "y.npy" (int64 [n]).
inline void writeBlobs(const std::string& prefix, int64_t n, uint64_t seed) {
  const Blobs b = twoBlobs(n, seed);
  writeNpyOf(prefix + "x.npy", "<f4", {n, 2}, b.x);
  writeNpyOf(prefix + "y.npy", "<i8", {n}, b.y);
}

// An MNIST-format split in `dir` (raw IDX files): n images of side x side in 3
// classes, class c a bright band over rows [c*side/3, (c+1)*side/3) plus noise.
inline void writeBandsIdx(const std::string& dir, const std::string& prefix, int64_t n,
                          int64_t side, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> images, labels;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(rng.below(3));
    labels.push_back(static_cast<uint8_t>(c));
    for (int64_t r = 0; r < side; ++r)
      for (int64_t col = 0; col < side; ++col) {
        const bool band = r * 3 / side == c;
        images.push_back(static_cast<uint8_t>((band ? 160 : 0) + rng.below(96)));
      }
  }
  data::writeIdx(dir + "/" + prefix + "-images-idx3-ubyte", {n, side, side}, images, false);
  data::writeIdx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", {n}, labels, true);
}

}  // namespace dtrain::test
