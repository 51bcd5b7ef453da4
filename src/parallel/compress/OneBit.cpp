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
  explicit OneBit(const BucketLayout& layout) : SignBitsCompressor(layout, 2) {}

 private:
  void reconstruction(const float* x, int64_t n, float& hi, float& lo) const override {
    double pos = 0, neg = 0;
    int64_t np = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] >= 0) {
        pos += x[i];
        ++np;
      } else {
        neg += x[i];
      }
    }
    hi = np ? static_cast<float>(pos / static_cast<double>(np)) : 0.0f;
    lo = np < n ? static_cast<float>(neg / static_cast<double>(n - np)) : 0.0f;
  }
};

}  // namespace

std::unique_ptr<Compressor> makeOneBit(const CompressOptions&, const BucketLayout& layout) {
  return std::make_unique<OneBit>(layout);
}

}  // namespace dtrain::parallel::compress
