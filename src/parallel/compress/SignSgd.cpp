// signsgd: scaled sign compression with error feedback (EF-SignSGD, Karimireddy
// et al., ICML 2019): each value is sent as its sign, and per chunk one scale,
// the mean absolute value ||x||_1 / d, so the decoded chunk has the same L1 norm.
// Aggregation: allgather (GatherCompressor): scales differ between ranks, and a
// majority vote would drop the magnitudes; each rank decodes N messages and averages.
// Message: 1 float per 512 values + 1 bit per value (~31x smaller than fp32).
#include <cmath>

#include "parallel/compress/Factories.h"
#include "parallel/compress/SignBits.h"

namespace dtrain::parallel::compress {
namespace {

class SignSgd final : public SignBitsCompressor {
 public:
  explicit SignSgd(const BucketLayout& layout) : SignBitsCompressor(layout, kLevels) {}
  static constexpr int kLevels = 1;  // +v and -v

 private:
  void reconstruction(const float* x, int64_t n, float& hi, float& lo) const override {
    double l1 = 0;
    for (int64_t i = 0; i < n; ++i) l1 += std::fabs(x[i]);
    hi = n ? static_cast<float>(l1 / static_cast<double>(n)) : 0.0f;
    lo = -hi;
  }
};

}  // namespace

std::unique_ptr<Compressor> makeSignSgd(const CompressOptions&, const BucketLayout& layout) {
  return std::make_unique<SignSgd>(layout);
}

int64_t signSgdWireBytes(const CompressOptions&, const BucketLayout& layout) {
  return signBitsWireBytes(layout, SignSgd::kLevels);
}

}  // namespace dtrain::parallel::compress
