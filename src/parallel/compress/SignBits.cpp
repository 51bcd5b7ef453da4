#include "parallel/compress/SignBits.h"

#include <algorithm>
#include <vector>

namespace dtrain::parallel::compress {

SignBitsCompressor::SignBitsCompressor(const BucketLayout& layout, int levels)
    : GatherCompressor(layout, /*errorFeedback=*/true), levels_(levels) {}

size_t SignBitsCompressor::messageBytes() const {
  return static_cast<size_t>(chunkCount(numel_) * levels_) * sizeof(float) +
         packedBytes(static_cast<size_t>(numel_), 1);
}

void SignBitsCompressor::encode(const float* x, uint8_t* msg, const ReduceContext&, int) {
  const int64_t chunks = chunkCount(numel_);
  std::vector<float> values(static_cast<size_t>(chunks * levels_));
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * kChunk, len = std::min(kChunk, numel_ - lo);
    float hi, low;
    reconstruction(x + lo, len, hi, low);
    values[c * levels_] = hi;
    if (levels_ == 2) values[c * levels_ + 1] = low;
  }
  putFloats(msg, values.data(), values.size());
  uint8_t* bits = msg + values.size() * sizeof(float);
  std::fill(bits, bits + packedBytes(static_cast<size_t>(numel_), 1), uint8_t{0});
  for (int64_t i = 0; i < numel_; ++i)
    if (x[i] >= 0) bits[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
}

void SignBitsCompressor::decodeAdd(const uint8_t* msg, float* out) const {
  const int64_t chunks = chunkCount(numel_);
  std::vector<float> values(static_cast<size_t>(chunks * levels_));
  getFloats(msg, values.data(), values.size());
  const uint8_t* bits = msg + values.size() * sizeof(float);
  for (int64_t c = 0; c < chunks; ++c) {
    const float hi = values[c * levels_];
    const float low = levels_ == 2 ? values[c * levels_ + 1] : -hi;
    for (int64_t i = c * kChunk, end = std::min(numel_, i + kChunk); i < end; ++i)
      out[i] += (bits[i >> 3] >> (i & 7)) & 1u ? hi : low;
  }
}

}  // namespace dtrain::parallel::compress
