// topk: top-k sparsification (Aji & Heafield 2017; Lin et al., DGC 2018) with
// --compress-ratio r: the k = ceil(r * n) values of largest magnitude of each
// bucket are sent as (index, value) pairs; error feedback keeps the rest for
// later steps. Ties at the k-th magnitude go to the lower index (deterministic).
// Aggregation: allgather (GatherCompressor): each rank's indices differ, so the
// pairs cannot be summed where they are; each rank scatters-adds all N messages.
// Message: k x (4-byte index + 4-byte value).
#include <algorithm>
#include <bit>
#include <functional>
#include <cmath>
#include <vector>

#include "core/Error.h"
#include "parallel/compress/Factories.h"
#include "parallel/compress/Gather.h"

namespace dtrain::parallel::compress {
namespace {

constexpr size_t kPairBytes = 8;  // a 4-byte index and a 4-byte value

class TopK final : public GatherCompressor {
 public:
  TopK(const CompressOptions& o, const BucketLayout& layout)
      : GatherCompressor(layout, /*errorFeedback=*/true), k_(keptCount(o.ratio, numel_)) {}

 private:
  size_t messageBytes() const override { return static_cast<size_t>(k_) * kPairBytes; }

  void encode(const float* x, uint8_t* msg, const ReduceContext&, int) override {
    // The k-th largest magnitude: non-negative floats order like their bits, so
    // a histogram of the top 12 bits finds the bin that holds it, and a
    // selection among that bin's values (usually a few) finds it exactly.
    const float threshold = kthLargestMagnitude(x);
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

  float kthLargestMagnitude(const float* x) {
    constexpr int kShift = 19;  // 31 value bits -> 4096 bins
    std::vector<int64_t> hist(size_t{1} << (31 - kShift), 0);
    for (int64_t i = 0; i < numel_; ++i) ++hist[(std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu) >> kShift];
    int64_t above = 0;
    size_t bin = hist.size() - 1;
    while (above + hist[bin] < k_) above += hist[bin--];
    magnitude_.clear();
    for (int64_t i = 0; i < numel_; ++i) {
      const uint32_t bits = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
      if ((bits >> kShift) == bin) magnitude_.push_back(std::bit_cast<float>(bits));
    }
    const auto nth = magnitude_.begin() + (k_ - above - 1);
    std::nth_element(magnitude_.begin(), nth, magnitude_.end(), std::greater<float>());
    return *nth;
  }

  void decodeAdd(const uint8_t* msg, float* out) const override {
    std::vector<uint32_t> idx(static_cast<size_t>(k_));
    std::vector<float> values(static_cast<size_t>(k_));
    std::memcpy(idx.data(), msg, idx.size() * 4);
    getFloats(msg + k_ * 4, values.data(), values.size());
    // The indices come from another rank (or a parameter-server worker): one
    // compare each keeps a corrupt message from writing outside the bucket
    // (found by tests/fuzz: FuzzCodecs).
    for (int64_t j = 0; j < k_; ++j) {
      DTRAIN_CHECK(idx[j] < static_cast<uint64_t>(numel_), "topk message: index ", idx[j],
                   " outside a bucket of ", numel_, " values");
      out[idx[j]] += values[j];
    }
  }

  const int64_t k_;
  std::vector<float> magnitude_;
};

}  // namespace

std::unique_ptr<Compressor> makeTopK(const CompressOptions& o, const BucketLayout& layout) {
  return std::make_unique<TopK>(o, layout);
}

int64_t topKWireBytes(const CompressOptions& o, const BucketLayout& layout) {
  return keptCount(o.ratio, layout.numel()) * static_cast<int64_t>(kPairBytes);
}

}  // namespace dtrain::parallel::compress
