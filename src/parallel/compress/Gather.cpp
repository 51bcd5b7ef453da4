#include "parallel/compress/Gather.h"

#include <algorithm>

namespace dtrain::parallel::compress {

GatherCompressor::GatherCompressor(const BucketLayout& layout, bool errorFeedback)
    : layout_(layout), numel_(layout.numel()), bounds_(chunkBounds(layout)) {
  if (errorFeedback) feedback_ = std::make_unique<ErrorFeedback>(numel_);
}

void GatherCompressor::reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) {
  const int n = comm.size();
  const size_t bytes = messageBytes();
  gathered_.resize(bytes * static_cast<size_t>(n));
  uint8_t* mine = gathered_.data() + bytes * static_cast<size_t>(comm.rank());
  encodeWithFeedback(grad, mine, ctx, comm.rank());
  comm::Options o;
  o.tag = ctx.tag;
  comm.allgather(mine, gathered_.data(), bytes, DType::U8, o);
  std::fill(grad, grad + numel_, 0.0f);
  for (int r = 0; r < n; ++r) {
    // This rank's message was decoded already (into sent_, from zeros: the
    // same values decodeAdd would add).
    if (feedback_ && r == comm.rank()) {
      for (int64_t j = 0; j < numel_; ++j) grad[j] += sent_[j];
    } else {
      decodeAdd(gathered_.data() + bytes * static_cast<size_t>(r), grad);
    }
  }
  if (n > 1) {
    const float scale = 1.0f / static_cast<float>(n);
    for (int64_t j = 0; j < numel_; ++j) grad[j] *= scale;
  }
  traffic_ = {};
  traffic_.payload += static_cast<int64_t>(bytes);
}

void GatherCompressor::encodeWithFeedback(float* grad, uint8_t* msg, const ReduceContext& ctx,
                                          int rank) {
  if (feedback_) feedback_->addTo(grad);
  encode(grad, msg, ctx, rank);
  if (feedback_) {
    // The residual is x minus what this rank's message decodes to, exactly.
    sent_.assign(static_cast<size_t>(numel_), 0.0f);
    decodeAdd(msg, sent_.data());
    feedback_->update(grad, sent_.data());
  }
}

void GatherCompressor::encodeMessage(float* grad, uint8_t* msg, int64_t step, int sender) {
  ReduceContext ctx;
  ctx.step = step;
  encodeWithFeedback(grad, msg, ctx, sender);
}

std::vector<std::pair<std::string, Tensor*>> GatherCompressor::state() {
  if (!feedback_) return {};
  return {{"residual", &feedback_->residual()}};
}

}  // namespace dtrain::parallel::compress
