#pragma once
// Base of the compressors whose messages cannot be summed as they are (signs
// with per-rank scales, quantization levels with per-rank norms, top-k indices
// that differ between ranks): every rank's message goes to every rank
// (allgather), and each rank decodes all of them and averages in fp32, in rank
// order, so every replica gets the same bits. Optional error feedback on the
// encoding side. The same message travels alone as a parameter-server push
// (MessageCodec).
#include <vector>

#include "parallel/compress/CompressorBasics.h"
#include "parallel/compress/Compressor.h"

namespace dtrain::parallel::compress {

class GatherCompressor : public Compressor, public MessageCodec {
 public:
  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) final;
  std::vector<std::pair<std::string, Tensor*>> state() override;
  // Error feedback around encode(); leaves what msg decodes to in sent_.
  void encodeMessage(float* grad, uint8_t* msg, int64_t step, int sender) final;

 protected:
  GatherCompressor(const BucketLayout& layout, bool errorFeedback);
  // Encodes x (numel floats) into msg (messageBytes(): the same on every rank).
  virtual void encode(const float* x, uint8_t* msg, const ReduceContext& ctx, int rank) = 0;

  const BucketLayout layout_;
  const int64_t numel_;
  const std::vector<int64_t> bounds_;  // chunkBounds(layout_), for the per-chunk quantizers
  int64_t chunks() const { return static_cast<int64_t>(bounds_.size()) - 1; }

 private:
  void encodeWithFeedback(float* grad, uint8_t* msg, const ReduceContext& ctx, int rank);
  std::unique_ptr<ErrorFeedback> feedback_;
  std::vector<uint8_t> gathered_;
  std::vector<float> sent_;
};

}  // namespace dtrain::parallel::compress
