// Views (reshape, flatten) and full reductions (sum, mean).
#include "autograd/Ops.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Reduce.h"

namespace dtrain::autograd {
namespace {

class ReshapeNode final : public Node {
 public:
  const char* name() const override { return "reshape"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    detail::writeScaled(sink, 0, 1.f, gy.data<float>(), gy.numel());
  }
};

// y = alpha * sum(x): dx = alpha * gy everywhere.
class SumNode final : public Node {
 public:
  SumNode(int64_t n, float alpha) : n_(n), alpha_(alpha) {}
  const char* name() const override { return alpha_ == 1.f ? "sum" : "mean"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    GradTarget t = sink.target(0);
    const float v = gy.item() * alpha_;
    for (int64_t i = 0; i < n_; ++i) t.ptr[i] = (t.accumulate ? t.ptr[i] : 0.f) + v;
  }

 private:
  int64_t n_;
  float alpha_;
};

Variable scaledSum(const Variable& x, bool average) {
  Tensor xd = detail::contig(x, average ? "mean" : "sum", "input");
  const float alpha = average && xd.numel() > 0 ? 1.f / static_cast<float>(xd.numel()) : 1.f;
  Tensor y = Tensor::full({}, static_cast<float>(kernels::sum(xd.data<float>(), xd.numel()) * alpha));
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<SumNode>(xd.numel(), alpha), {&x});
}

}  // namespace

Variable reshape(const Variable& x, const Shape& shape) {
  Tensor y = detail::contig(x, "reshape", "input").view(shape);
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<ReshapeNode>(), {&x});
}

Variable flatten(const Variable& x, int64_t startDim) {
  Shape s(x.shape().begin(), x.shape().begin() + startDim);
  s.push_back(-1);
  return reshape(x, s);
}

Variable sum(const Variable& x) { return scaledSum(x, false); }
Variable mean(const Variable& x) { return scaledSum(x, true); }

}  // namespace dtrain::autograd
