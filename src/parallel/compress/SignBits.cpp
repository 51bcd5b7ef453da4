#include "parallel/compress/SignBits.h"

#include <algorithm>
#include <array>
#include <bit>
#include <vector>

namespace dtrain::parallel::compress {
namespace {
// kByteMasks[b][j]: all ones where bit j of b is set.
const auto kByteMasks = [] {
  std::array<std::array<uint32_t, 8>, 256> m{};
  for (int b = 0; b < 256; ++b)
    for (int j = 0; j < 8; ++j) m[b][j] = (b >> j) & 1 ? 0xffffffffu : 0u;
  return m;
}();
}  // namespace

SignBitsCompressor::SignBitsCompressor(const BucketLayout& layout, int levels)
    : GatherCompressor(layout, /*errorFeedback=*/true), levels_(levels) {}

int64_t signBitsWireBytes(const BucketLayout& layout, int levels) {
  return chunkCount(layout) * levels * static_cast<int64_t>(sizeof(float)) +
         static_cast<int64_t>(packedBytes(static_cast<size_t>(layout.numel()), 1));
}

size_t SignBitsCompressor::messageBytes() const { return static_cast<size_t>(signBitsWireBytes(layout_, levels_)); }

void SignBitsCompressor::encode(const float* x, uint8_t* msg, const ReduceContext&, int) {
  std::vector<float> values(static_cast<size_t>(chunks() * levels_));
  for (int64_t c = 0; c < chunks(); ++c) {
    float hi, low;
    reconstruction(x + bounds_[c], bounds_[c + 1] - bounds_[c], hi, low);
    values[c * levels_] = hi;
    if (levels_ == 2) values[c * levels_ + 1] = low;
  }
  putFloats(msg, values.data(), values.size());
  uint8_t* bits = msg + values.size() * sizeof(float);
  // Byte by byte (8 values), a form the compiler vectorizes.
  const int64_t full = numel_ / 8;
  for (int64_t b = 0; b < full; ++b) {
    const float* v = x + b * 8;
    unsigned byte = 0;
    for (int j = 0; j < 8; ++j) byte |= (v[j] >= 0 ? 1u : 0u) << j;
    bits[b] = static_cast<uint8_t>(byte);
  }
  if (full * 8 < numel_) {
    unsigned byte = 0;
    for (int64_t i = full * 8; i < numel_; ++i) byte |= (x[i] >= 0 ? 1u : 0u) << (i - full * 8);
    bits[full] = static_cast<uint8_t>(byte);
  }
}

void SignBitsCompressor::decodeAdd(const uint8_t* msg, float* out) const {
  std::vector<float> values(static_cast<size_t>(chunks() * levels_));
  getFloats(msg, values.data(), values.size());
  const uint8_t* bits = msg + values.size() * sizeof(float);
  for (int64_t c = 0; c < chunks(); ++c) {
    const float hi = values[c * levels_];
    const float low = levels_ == 2 ? values[c * levels_ + 1] : -hi;
    const int64_t end = bounds_[c + 1];
    const uint32_t hiBits = std::bit_cast<uint32_t>(hi), lowBits = std::bit_cast<uint32_t>(low);
    int64_t i = bounds_[c];
    for (; i < end && (i & 7); ++i) out[i] += (bits[i >> 3] >> (i & 7)) & 1u ? hi : low;
    for (; i + 8 <= end; i += 8) {  // whole bytes, as vector blends
      const uint32_t* m = kByteMasks[bits[i >> 3]].data();
      for (int j = 0; j < 8; ++j) out[i + j] += std::bit_cast<float>((m[j] & hiBits) | (~m[j] & lowBits));
    }
    for (; i < end; ++i) out[i] += (bits[i >> 3] >> (i & 7)) & 1u ? hi : low;
  }
}

}  // namespace dtrain::parallel::compress
