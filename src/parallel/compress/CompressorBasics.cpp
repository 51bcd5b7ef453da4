#include "parallel/compress/CompressorBasics.h"

#include <algorithm>

namespace dtrain::parallel::compress {

std::vector<int64_t> chunkBounds(const BucketLayout& layout) {
  std::vector<int64_t> bounds{0};
  for (const auto& shape : layout.shapes) {
    const int64_t n = shapeNumel(shape);
    const int64_t start = bounds.back();
    for (int64_t off = kChunk; off < n; off += kChunk) bounds.push_back(start + off);
    if (n > 0) bounds.push_back(start + n);
  }
  return bounds;
}

int64_t chunkCount(const BucketLayout& layout) {
  int64_t chunks = 0;
  for (const auto& shape : layout.shapes) chunks += (shapeNumel(shape) + kChunk - 1) / kChunk;
  return chunks;
}

uint64_t mixSeed(uint64_t seed, int64_t a, int64_t b, int64_t c) {
  // splitmix64 over the parts: consecutive steps or buckets give unrelated streams.
  uint64_t h = seed ^ 0x6a09e667f3bcc909ULL;
  for (int64_t v : {a, b, c}) {
    h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
  }
  return h;
}

// Through a 64-bit window: at most 7 pending bits plus one code of <= 16 bits.
void packCodes(const uint32_t* codes, size_t n, int bits, uint8_t* out) {
  uint64_t window = 0;
  int pending = 0;
  for (size_t i = 0; i < n; ++i) {
    window |= static_cast<uint64_t>(codes[i]) << pending;
    pending += bits;
    for (; pending >= 8; pending -= 8, window >>= 8) *out++ = static_cast<uint8_t>(window);
  }
  if (pending > 0) *out = static_cast<uint8_t>(window);
}

void unpackCodes(const uint8_t* packed, size_t n, int bits, uint32_t* codes) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t window = 0;
  int have = 0;
  for (size_t i = 0; i < n; ++i) {
    for (; have < bits; have += 8) window |= static_cast<uint64_t>(*packed++) << have;
    codes[i] = static_cast<uint32_t>(window & mask);
    window >>= bits;
    have -= bits;
  }
}

void allreduceMean(float* data, size_t n, comm::Communicator& comm, const ReduceContext& ctx,
                   Traffic& traffic) {
  comm::Options o;
  o.op = comm::ReduceOp::Sum;
  o.algo = ctx.algo;
  o.tag = ctx.tag;
  comm.allreduce(data, data, n, DType::F32, o);
  if (comm.size() > 1) {
    const float scale = 1.0f / static_cast<float>(comm.size());
    for (size_t j = 0; j < n; ++j) data[j] *= scale;
  }
  traffic.payload += static_cast<int64_t>(n * sizeof(float));
}

void ErrorFeedback::addTo(float* grad) const {
  const float* r = residual_.data<float>();
  for (int64_t i = 0, n = residual_.numel(); i < n; ++i) grad[i] += r[i];
}

void ErrorFeedback::update(const float* x, const float* sent) {
  float* r = residual_.data<float>();
  for (int64_t i = 0, n = residual_.numel(); i < n; ++i) r[i] = x[i] - sent[i];
}

}  // namespace dtrain::parallel::compress
