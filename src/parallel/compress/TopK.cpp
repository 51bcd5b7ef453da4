// topk: top-k sparsification (Aji & Heafield 2017; Lin et al., DGC 2018) with
// --compress-ratio r: the k = ceil(r * n) values of largest magnitude of each
// bucket are sent as (index, value) pairs; error feedback keeps the rest for
// later steps. Ties at the k-th magnitude go to the lower index (deterministic).
// Aggregation: allgather (GatherCompressor): each rank's indices differ, so the
// pairs cannot be summed where they are; each rank scatters-adds all N messages.
// Message: k x (4-byte index + 4-byte value).
#include <algorithm>
#include <cmath>
#include <numeric>
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
    order_.resize(static_cast<size_t>(numel_));
    std::iota(order_.begin(), order_.end(), 0u);
    auto larger = [x](uint32_t a, uint32_t b) {
      const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
      return fa > fb || (fa == fb && a < b);
    };
    std::nth_element(order_.begin(), order_.begin() + k_, order_.end(), larger);
    std::sort(order_.begin(), order_.begin() + k_);  // index order: a cache-friendly scatter
    std::vector<float> values(static_cast<size_t>(k_));
    for (int64_t j = 0; j < k_; ++j) values[j] = x[order_[j]];
    std::memcpy(msg, order_.data(), static_cast<size_t>(k_) * 4);
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
  std::vector<uint32_t> order_;
};

}  // namespace

std::unique_ptr<Compressor> makeTopK(const CompressOptions& o, const BucketLayout& layout) {
  return std::make_unique<TopK>(o, layout);
}

}  // namespace dtrain::parallel::compress
