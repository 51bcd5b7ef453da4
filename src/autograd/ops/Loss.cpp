// softmax, logSoftmax, crossEntropy (fused), mseLoss, embedding.
#include "autograd/Ops.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Softmax.h"

namespace dtrain::autograd {
namespace {

using detail::writeGrad;

class SoftmaxNode final : public Node {
 public:
  SoftmaxNode(Tensor y, bool log) : y_(std::move(y)), log_(log) {}
  const char* name() const override { return log_ ? "log_softmax" : "softmax"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t R = y_.size(0), C = y_.size(1);
    writeGrad(sink, 0, y_.numel(), [&](float* o) {
      if (log_) kernels::logSoftmaxBackward(y_.data<float>(), gy.data<float>(), o, R, C);
      else kernels::softmaxBackward(y_.data<float>(), gy.data<float>(), o, R, C);
    });
  }
  void release() override { y_ = Tensor(); }

 private:
  Tensor y_;
  bool log_;
};

class CrossEntropyNode final : public Node {
 public:
  CrossEntropyNode(Tensor probs, Tensor labels) : probs_(std::move(probs)), labels_(std::move(labels)) {}
  const char* name() const override { return "cross_entropy"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t R = probs_.size(0), C = probs_.size(1);
    const float scale = gy.item() / static_cast<float>(R);
    writeGrad(sink, 0, probs_.numel(), [&](float* o) {
      kernels::crossEntropyBackward(probs_.data<float>(), labels_.data<int32_t>(), scale, o, R, C);
    });
  }
  void release() override { probs_ = labels_ = Tensor(); }

 private:
  Tensor probs_, labels_;
};

class MseNode final : public Node {
 public:
  explicit MseNode(Tensor diff) : diff_(std::move(diff)) {}
  const char* name() const override { return "mse_loss"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const float s = 2.f * gy.item() / static_cast<float>(diff_.numel());
    detail::writeScaled(sink, 0, s, diff_.data<float>(), diff_.numel());
  }
  void release() override { diff_ = Tensor(); }

 private:
  Tensor diff_;
};

class EmbeddingNode final : public Node {
 public:
  EmbeddingNode(Tensor idx, int64_t V, int64_t D) : idx_(std::move(idx)), V_(V), D_(D) {}
  const char* name() const override { return "embedding"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    GradTarget t = sink.target(1);
    if (!t.accumulate) std::fill(t.ptr, t.ptr + V_ * D_, 0.f);
    const int32_t* ix = idx_.data<int32_t>();
    const float* g = gy.data<float>();
    for (int64_t i = 0; i < idx_.numel(); ++i) kernels::axpy(1.f, g + i * D_, t.ptr + ix[i] * D_, D_);
  }
  void release() override { idx_ = Tensor(); }

 private:
  Tensor idx_;
  int64_t V_, D_;
};

Variable softmaxImpl(const Variable& x, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  Tensor xd = detail::contig(x, op, "input");
  DTRAIN_CHECK(xd.dim() == 2, op, ": expected a 2-d input, got ", shapeStr(xd.shape()));
  Tensor y = Tensor::empty(xd.shape());
  if (log) kernels::logSoftmaxRows(xd.data<float>(), y.data<float>(), xd.size(0), xd.size(1));
  else kernels::softmaxRows(xd.data<float>(), y.data<float>(), xd.size(0), xd.size(1));
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(y, std::make_shared<SoftmaxNode>(y, log), {&x});
}

}  // namespace

Variable softmax(const Variable& x) { return softmaxImpl(x, false); }
Variable logSoftmax(const Variable& x) { return softmaxImpl(x, true); }

Variable crossEntropy(const Variable& logits, const Tensor& labels) {
  Tensor xd = detail::contig(logits, "cross_entropy", "logits");
  DTRAIN_CHECK(xd.dim() >= 2, "cross_entropy: expected logits [..., classes], got ",
               shapeStr(xd.shape()));
  // Every leading dimension is a row: [B, T, V] logits are B*T predictions.
  const int64_t classes = xd.size(-1), rows = classes > 0 ? xd.numel() / classes : 0;
  DTRAIN_CHECK(labels.dtype() == DType::I32 && labels.numel() == rows, "cross_entropy: expected ",
               rows, " int32 labels, got ", labels.numel(), " ", dtypeName(labels.dtype()));
  Tensor lab = labels.contiguous();
  Tensor probs = Tensor::empty({rows, classes});
  double loss = kernels::crossEntropyForward(xd.data<float>(), lab.data<int32_t>(),
                                             probs.data<float>(), rows, classes);
  Tensor y = Tensor::full({}, static_cast<float>(loss));
  if (!needsGraph({&logits})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<CrossEntropyNode>(probs, lab), {&logits});
}

Variable mseLoss(const Variable& pred, const Tensor& target) {
  Tensor pd = detail::contig(pred, "mse_loss", "prediction");
  DTRAIN_CHECK(target.shape() == pd.shape(), "mse_loss: target ", shapeStr(target.shape()),
               " does not match prediction ", shapeStr(pd.shape()));
  Tensor tg = target.contiguous();
  Tensor diff = Tensor::empty(pd.shape());
  kernels::sub(pd.data<float>(), tg.data<float>(), diff.data<float>(), diff.numel());
  double s = 0;
  const float* d = diff.data<float>();
  for (int64_t i = 0; i < diff.numel(); ++i) s += static_cast<double>(d[i]) * d[i];
  Tensor y = Tensor::full({}, static_cast<float>(diff.numel() ? s / diff.numel() : 0.0));
  if (!needsGraph({&pred})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<MseNode>(diff), {&pred});
}

Variable embedding(const Tensor& indices, const Variable& weight) {
  Tensor wd = detail::contig(weight, "embedding", "weight");
  DTRAIN_CHECK(wd.dim() == 2, "embedding: weight must be [vocab, dim], got ", shapeStr(wd.shape()));
  DTRAIN_CHECK(indices.dtype() == DType::I32, "embedding: indices must be int32");
  const int64_t V = wd.size(0), D = wd.size(1);
  Tensor idx = indices.contiguous();
  Shape out = idx.shape();
  out.push_back(D);
  Tensor y = Tensor::empty(out);
  const int32_t* ix = idx.data<int32_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    DTRAIN_CHECK(ix[i] >= 0 && ix[i] < V, "embedding: index ", ix[i], " out of range [0, ", V, ")");
    std::copy(wd.data<float>() + ix[i] * D, wd.data<float>() + (ix[i] + 1) * D,
              y.data<float>() + i * D);
  }
  if (!needsGraph({&weight})) return Variable(std::move(y));
  Variable none;
  return record(std::move(y), std::make_shared<EmbeddingNode>(idx, V, D), {&none, &weight});
}

}  // namespace dtrain::autograd
