#pragma once
// fp16 and bf16: the gradient cast to a 16-bit float (after the 1/N of the mean,
// in fp32, so the sum cannot overflow where the values could), allreduced in
// that dtype and cast back. The allreduce sums in the compressed domain, which
// is exact up to rounding: the comm layer widens each element to fp32, adds,
// and rounds back once per hop (as NCCL's and Gloo's fp16 sums, and PyTorch's
// fp16_compress_hook). No error feedback (PyTorch's hook has none): the
// rounding error is relative (2^-11 for fp16, 2^-8 for bf16), not a bias.
// Message: 2 bytes per value. As a parameter-server push (MessageCodec) the
// gradient is cast as it is (the server applies it alone, no sum to overflow).
#include <cstring>
#include <vector>

#include "parallel/compress/Compressor.h"
#include "tensor/Half.h"

namespace dtrain::parallel::compress {

template <DType D, uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
class CastCompressor final : public Compressor, public MessageCodec {
 public:
  explicit CastCompressor(const BucketLayout& layout) : numel_(static_cast<size_t>(layout.numel())) {}

  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) override {
    half_.resize(numel_);
    narrowTo16(D, grad, 1.0f / static_cast<float>(comm.size()), half_.data(), static_cast<int64_t>(numel_));
    comm::Options o;
    o.op = comm::ReduceOp::Sum;
    o.algo = ctx.algo;
    o.tag = ctx.tag;
    comm.allreduce(half_.data(), half_.data(), numel_, D, o);
    widenFrom16(D, half_.data(), grad, static_cast<int64_t>(numel_));
    traffic_ = {};
    traffic_.payload += static_cast<int64_t>(numel_ * sizeof(uint16_t));
  }

  size_t messageBytes() const override { return numel_ * sizeof(uint16_t); }
  void encodeMessage(float* grad, uint8_t* msg, int64_t, int) override {
    for (size_t j = 0; j < numel_; ++j) {
      const uint16_t h = Narrow(grad[j]);
      std::memcpy(msg + j * sizeof h, &h, sizeof h);  // msg may be unaligned
    }
  }
  void decodeAdd(const uint8_t* msg, float* out) const override {
    for (size_t j = 0; j < numel_; ++j) {
      uint16_t h;
      std::memcpy(&h, msg + j * sizeof h, sizeof h);
      out[j] += Widen(h);
    }
  }

 private:
  const size_t numel_;
  std::vector<uint16_t> half_;
};

}  // namespace dtrain::parallel::compress
