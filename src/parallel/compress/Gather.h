#pragma once
// Base of the compressors whose messages cannot be summed as they are (signs
// with per-rank scales, quantization levels with per-rank norms, top-k indices
// that differ between ranks): every rank's message goes to every rank
// (allgather), and each rank decodes all of them and averages in fp32, in rank
// order, so every replica gets the same bits. Optional error feedback on the
// encoding side.
#include <vector>

#include "parallel/compress/Common.h"
#include "parallel/compress/Compressor.h"

namespace dtrain::parallel::compress {

class GatherCompressor : public Compressor {
 public:
  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) final;
  std::vector<std::pair<std::string, Tensor*>> state() override;

 protected:
  GatherCompressor(const BucketLayout& layout, bool errorFeedback);
  // Bytes of one rank's message for this bucket (the same on every rank).
  virtual size_t messageBytes() const = 0;
  // Encodes x (numel floats) into msg (messageBytes()).
  virtual void encode(const float* x, uint8_t* msg, const ReduceContext& ctx, int rank) = 0;
  // out += the decoded message (numel floats).
  virtual void decodeAdd(const uint8_t* msg, float* out) const = 0;

  const BucketLayout layout_;
  const int64_t numel_;
  const std::vector<int64_t> bounds_;  // chunkBounds(layout_), for the per-chunk quantizers
  int64_t chunks() const { return static_cast<int64_t>(bounds_.size()) - 1; }

 private:
  std::unique_ptr<ErrorFeedback> feedback_;
  std::vector<uint8_t> gathered_;
  std::vector<float> sent_;
};

}  // namespace dtrain::parallel::compress
