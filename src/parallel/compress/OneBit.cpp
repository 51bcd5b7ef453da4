// onebit: 1-bit SGD (Seide et al., INTERSPEECH 2014). Each value is sent as its
// sign; per chunk, the two bit states decode to the mean of the chunk's
// non-negative values and the mean of its negative values, the reconstruction
// that minimizes the squared quantization error for a given split. Error
// feedback carries the quantization error to the next step.
// Aggregation: allgather (GatherCompressor): ranks' chunk means differ, so the
// bits cannot be summed; each rank decodes N messages and averages.
// Message: 2 floats per 512 values + 1 bit per value (~28x smaller than fp32).
#include "parallel/compress/Factories.h"
#include "parallel/compress/SignBits.h"

namespace dtrain::parallel::compress {
namespace {

class OneBit final : public SignBitsCompressor {
 public:
  explicit OneBit(const BucketLayout& layout) : SignBitsCompressor(layout, kLevels) {}
  static constexpr int kLevels = 2;  // hi and lo

 private:
  void reconstruction(const float* x, int64_t n, float& hi, float& lo) const override {
    // Eight independent lanes (vectorizable), branch-free (the signs are random).
    double posLane[8] = {}, negLane[8] = {};
    int64_t countLane[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) {
        const float v = x[i + j];
        posLane[j] += v >= 0 ? v : 0.0f;
        negLane[j] += v >= 0 ? 0.0f : v;
        countLane[j] += v >= 0;
      }
    double pos = 0, neg = 0;
    int64_t np = 0;
    for (int j = 0; j < 8; ++j) {
      pos += posLane[j];
      neg += negLane[j];
      np += countLane[j];
    }
    for (; i < n; ++i) {
      pos += x[i] >= 0 ? x[i] : 0.0f;
      neg += x[i] >= 0 ? 0.0f : x[i];
      np += x[i] >= 0;
    }
    hi = np ? static_cast<float>(pos / static_cast<double>(np)) : 0.0f;
    lo = np < n ? static_cast<float>(neg / static_cast<double>(n - np)) : 0.0f;
  }
};

}  // namespace

std::unique_ptr<Compressor> makeOneBit(const CompressOptions&, const BucketLayout& layout) {
  return std::make_unique<OneBit>(layout);
}

int64_t oneBitWireBytes(const CompressOptions&, const BucketLayout& layout) {
  return signBitsWireBytes(layout, OneBit::kLevels);
}

}  // namespace dtrain::parallel::compress
