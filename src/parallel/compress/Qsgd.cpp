// qsgd: QSGD (Alistarh et al., NeurIPS 2017) with --compress-bits b. Per chunk
// of 512 values, with the chunk's L2 norm ||x||, each value becomes
// sign(x) * ||x|| * l / s with s = 2^b - 1 levels and l = |x| / ||x|| * s rounded
// down or up at random, up with probability equal to the fraction: E[l] is the
// unrounded value, so the message decodes to x in expectation (unbiased, hence
// no error feedback). The random draws depend on (seed, step, bucket, rank).
// Aggregation: allgather (GatherCompressor): the levels are relative to each
// rank's own norms, so they cannot be summed; each rank decodes N messages.
// Message: 1 float per 512 values + (b + 1) bits per value.
#include <cmath>
#include <vector>

#include "core/Rng.h"
#include "parallel/compress/Factories.h"
#include "parallel/compress/Gather.h"

namespace dtrain::parallel::compress {
namespace {

// A norm a chunk, then a sign and a level a value.
int64_t messageSize(const BucketLayout& layout, int bits) {
  return chunkCount(layout) * static_cast<int64_t>(sizeof(float)) +
         static_cast<int64_t>(packedBytes(static_cast<size_t>(layout.numel()), bits + 1));
}

class Qsgd final : public GatherCompressor {
 public:
  Qsgd(const CompressOptions& o, const BucketLayout& layout)
      : GatherCompressor(layout, /*errorFeedback=*/false),
        bits_(o.bits),
        levels_((1u << o.bits) - 1),
        seed_(o.seed) {}

 private:
  size_t messageBytes() const override { return static_cast<size_t>(messageSize(layout_, bits_)); }

  void encode(const float* x, uint8_t* msg, const ReduceContext& ctx, int rank) override {
    Rng rng(mixSeed(seed_, ctx.step, layout_.index, rank));
    std::vector<float> norms(static_cast<size_t>(chunks()));
    codes_.resize(static_cast<size_t>(numel_));
    for (int64_t c = 0; c < chunks(); ++c) {
      const int64_t lo = bounds_[c], hi = bounds_[c + 1];
      double sq = 0;
      for (int64_t i = lo; i < hi; ++i) sq += static_cast<double>(x[i]) * x[i];
      const float norm = static_cast<float>(std::sqrt(sq));
      norms[c] = norm;
      const float scale = norm > 0 ? static_cast<float>(levels_) / norm : 0.0f;
      for (int64_t i = lo; i < hi; ++i) {
        const float a = std::fabs(x[i]) * scale;  // in [0, levels]
        uint32_t level = static_cast<uint32_t>(a);
        level += rng.uniform() < a - static_cast<float>(level);  // up with probability frac(a)
        codes_[i] = std::min(level, levels_) << 1 | (x[i] < 0 ? 1u : 0u);
      }
    }
    putFloats(msg, norms.data(), norms.size());
    packCodes(codes_.data(), codes_.size(), bits_ + 1, msg + norms.size() * sizeof(float));
  }

  void decodeAdd(const uint8_t* msg, float* out) const override {
    std::vector<float> norms(static_cast<size_t>(chunks()));
    getFloats(msg, norms.data(), norms.size());
    std::vector<uint32_t> codes(static_cast<size_t>(numel_));
    unpackCodes(msg + norms.size() * sizeof(float), codes.size(), bits_ + 1, codes.data());
    for (int64_t c = 0; c < chunks(); ++c) {
      const float unit = norms[c] / static_cast<float>(levels_);
      for (int64_t i = bounds_[c]; i < bounds_[c + 1]; ++i) {
        const float v = unit * static_cast<float>(codes[i] >> 1);
        out[i] += codes[i] & 1u ? -v : v;
      }
    }
  }

  const int bits_;
  const uint32_t levels_;
  const uint64_t seed_;
  std::vector<uint32_t> codes_;
};

}  // namespace

std::unique_ptr<Compressor> makeQsgd(const CompressOptions& o, const BucketLayout& layout) {
  return std::make_unique<Qsgd>(o, layout);
}

int64_t qsgdWireBytes(const CompressOptions& o, const BucketLayout& layout) { return messageSize(layout, o.bits); }

}  // namespace dtrain::parallel::compress
