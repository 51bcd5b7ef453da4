// randomk: random-k sparsification (Stich et al., NeurIPS 2018) with
// --compress-ratio r: k = ceil(r * n) values of each bucket at indices drawn
// from (seed, step, bucket), with error feedback for the rest.
// Aggregation: allreduce of the k values, exact in the compressed domain: every
// rank draws the same indices, so the messages line up value by value and their
// sum is the sum of the sparsified gradients (no indices on the wire).
// Message: k floats.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/Rng.h"
#include "parallel/compress/CompressorBasics.h"
#include "parallel/compress/Factories.h"

namespace dtrain::parallel::compress {
namespace {

class RandomK final : public Compressor {
 public:
  RandomK(const CompressOptions& o, const BucketLayout& layout)
      : index_(layout.index), numel_(layout.numel()), k_(keptCount(o.ratio, numel_)),
        seed_(o.seed), feedback_(numel_) {}

  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) override {
    // Partial Fisher-Yates: the first k of a random permutation, then index order.
    Rng rng(mixSeed(seed_, ctx.step, index_, -1));
    order_.resize(static_cast<size_t>(numel_));
    std::iota(order_.begin(), order_.end(), 0u);
    for (int64_t j = 0; j < k_; ++j)
      std::swap(order_[j], order_[j + static_cast<int64_t>(rng.below(numel_ - j))]);
    std::sort(order_.begin(), order_.begin() + k_);

    feedback_.addTo(grad);  // grad is now x = g + r
    values_.resize(static_cast<size_t>(k_));
    for (int64_t j = 0; j < k_; ++j) values_[j] = grad[order_[j]];
    // The residual is x off the chosen indices (and 0 on them): x - sent, exactly.
    float* r = feedback_.residual().data<float>();
    std::copy(grad, grad + numel_, r);
    for (int64_t j = 0; j < k_; ++j) r[order_[j]] = 0.0f;

    comm::Options o;
    o.tag = ctx.tag;
    o.algo = ctx.algo;
    comm.allreduce(values_.data(), values_.data(), values_.size(), DType::F32, o);
    const float scale = 1.0f / static_cast<float>(comm.size());
    std::fill(grad, grad + numel_, 0.0f);
    for (int64_t j = 0; j < k_; ++j) grad[order_[j]] = values_[j] * scale;
    traffic_ = {};
    traffic_.payload += k_ * static_cast<int64_t>(sizeof(float));
  }

  std::vector<std::pair<std::string, Tensor*>> state() override {
    return {{"residual", &feedback_.residual()}};
  }

 private:
  const int index_;
  const int64_t numel_, k_;
  const uint64_t seed_;
  ErrorFeedback feedback_;
  std::vector<uint32_t> order_;
  std::vector<float> values_;
};

}  // namespace

std::unique_ptr<Compressor> makeRandomK(const CompressOptions& o, const BucketLayout& layout) {
  return std::make_unique<RandomK>(o, layout);
}

int64_t randomKWireBytes(const CompressOptions& o, const BucketLayout& layout) {
  return keptCount(o.ratio, layout.numel()) * static_cast<int64_t>(sizeof(float));  // the values alone
}

}  // namespace dtrain::parallel::compress
