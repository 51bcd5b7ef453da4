// causalSelfAttention: the fused flash-style kernel of tensor/cpu/Attention.h.
// The node keeps qkv, the output and the per-row log-sum-exp ([B, H, T]): no
// [T, T] score matrix lives between forward and backward.
#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Attention.h"

namespace dtrain::autograd {
namespace {

// Under bf16 (Precision.h) qkv_ and y_ are bf16 copies (half the bytes: the
// backward's products read bf16 operands anyway), else the fp32 tensors.
class CausalAttentionNode final : public Node {
 public:
  CausalAttentionNode(Tensor qkv, Tensor y, Tensor lse, int64_t heads)
      : qkv_(std::move(qkv)), y_(std::move(y)), lse_(std::move(lse)), heads_(heads) {}
  const char* name() const override { return "causal_self_attention"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t B = y_.size(0), T = y_.size(1), C = y_.size(2);
    detail::writeGrad(sink, 0, qkv_.numel(), [&](float* g) {
      if (qkv_.dtype() == DType::BF16)
        kernels::causalAttentionBackwardBf16(qkv_.data<BFloat16>(), y_.data<BFloat16>(),
                                             lse_.data<float>(), gy.data<float>(), g, B, T, C, heads_);
      else
        kernels::causalAttentionBackward(qkv_.data<float>(), y_.data<float>(), lse_.data<float>(),
                                         gy.data<float>(), g, B, T, C, heads_);
    });
  }
  void release() override { qkv_ = y_ = lse_ = Tensor(); }

 private:
  Tensor qkv_, y_, lse_;
  int64_t heads_;
};

}  // namespace

Variable causalSelfAttention(const Variable& qkv, int64_t nHead) {
  Tensor xd = detail::contig(qkv, "causal_self_attention", "qkv");
  DTRAIN_CHECK(xd.dim() == 3 && xd.size(2) % 3 == 0, "causal_self_attention: expected qkv [B, T, 3C], got ",
               shapeStr(xd.shape()));
  const int64_t B = xd.size(0), T = xd.size(1), C = xd.size(2) / 3;
  DTRAIN_CHECK(nHead > 0 && C % nHead == 0, "causal_self_attention: embedding size ", C,
               " is not divisible by ", nHead, " heads");
  Tensor y = Tensor::empty({B, T, C});
  const bool graph = needsGraph({&qkv});
  Tensor lse = graph ? Tensor::empty({B, nHead, T}) : Tensor();
  // Its products follow --precision, as linear layers' do.
  const Tensor qkvBf16 = precision() == Precision::BF16 ? detail::toBf16(xd.data<float>(), xd.shape()) : Tensor();
  kernels::causalAttentionForward(xd.data<float>(), y.data<float>(),
                                  graph ? lse.data<float>() : nullptr, B, T, C, nHead,
                                  qkvBf16.defined() ? qkvBf16.data<BFloat16>() : nullptr);
  if (!graph) return Variable(std::move(y));
  auto node = qkvBf16.defined()
                  ? std::make_shared<CausalAttentionNode>(qkvBf16, detail::toBf16(y.data<float>(), y.shape()), lse, nHead)
                  : std::make_shared<CausalAttentionNode>(xd, y, lse, nHead);
  return record(y, std::move(node), {&qkv});
}

}  // namespace dtrain::autograd
