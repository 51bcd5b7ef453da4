// topk: top-k sparsification (Aji & Heafield 2017; Lin et al., DGC 2018) with
// --compress-ratio r: the k = ceil(r * n) values of largest magnitude of each
// bucket are sent as (index, value) pairs; error feedback keeps the rest for
// later steps. Ties at the k-th magnitude go to the lower index (deterministic).
// Aggregation: allgather (GatherCompressor): each rank's indices differ, so the
// pairs cannot be summed where they are; each rank scatters-adds all N messages.
// Message: k x (4-byte index + 4-byte value).
#include <algorithm>
#include <functional>
#include <cmath>
#include <vector>

#include "parallel/compress/Factories.h"
#include "parallel/compress/Gather.h"

namespace dtrain::parallel::compress {
namespace {

class TopK final : public GatherCompressor {
 public:
  TopK(const CompressOptions& o, const BucketLayout& layout)
      : GatherCompressor(layout, /*errorFeedback=*/true), k_(keptCount(o.ratio, numel_)) {}

 private:
  size_t messageBytes() const override { return static_cast<size_t>(k_) * 8; }

  void encode(const float* x, uint8_t* msg, const ReduceContext&, int) override {
    // The k-th largest magnitude by selection on a copy of the magnitudes, then
    // one scan in index order: everything above it, and ties at it from the
    // lowest index up (deterministic).
    magnitude_.resize(static_cast<size_t>(numel_));
    for (int64_t i = 0; i < numel_; ++i) magnitude_[i] = std::fabs(x[i]);
    std::nth_element(magnitude_.begin(), magnitude_.begin() + (k_ - 1), magnitude_.end(),
                     std::greater<float>());
    const float threshold = magnitude_[k_ - 1];
    int64_t above = 0;
    for (int64_t i = 0; i < numel_; ++i) above += std::fabs(x[i]) > threshold;
    int64_t ties = k_ - above;
    std::vector<uint32_t> idx;
    std::vector<float> values;
    idx.reserve(static_cast<size_t>(k_));
    values.reserve(static_cast<size_t>(k_));
    for (int64_t i = 0; i < numel_; ++i) {
      const float m = std::fabs(x[i]);
      if (m > threshold || (m == threshold && ties-- > 0)) {
        idx.push_back(static_cast<uint32_t>(i));
        values.push_back(x[i]);
      }
    }
    std::memcpy(msg, idx.data(), static_cast<size_t>(k_) * 4);
    putFloats(msg + k_ * 4, values.data(), values.size());
  }

  void decodeAdd(const uint8_t* msg, float* out) const override {
    std::vector<uint32_t> idx(static_cast<size_t>(k_));
    std::vector<float> values(static_cast<size_t>(k_));
    std::memcpy(idx.data(), msg, idx.size() * 4);
    getFloats(msg + k_ * 4, values.data(), values.size());
    for (int64_t j = 0; j < k_; ++j) out[idx[j]] += values[j];
  }

  const int64_t k_;
  std::vector<float> magnitude_;
};

}  // namespace

std::unique_ptr<Compressor> makeTopK(const CompressOptions& o, const BucketLayout& layout) {
  return std::make_unique<TopK>(o, layout);
}

}  // namespace dtrain::parallel::compress
