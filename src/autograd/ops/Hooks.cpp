// beforeBackward: an identity whose backward first runs a callback.
// Backward reaches it before any node that produced its input, so the callback can
// prepare what those nodes read (ZeRO-3 gathers a module's parameters back
// before the module's backward runs).
// observeGradient: the same, with the gradient shown to the callback
// (sufficient factor broadcasting keeps a Linear's output gradient).
#include "autograd/Ops.h"
#include "autograd/ops/OpUtil.h"

namespace dtrain::autograd {
namespace {

class BeforeBackwardNode final : public Node {
 public:
  explicit BeforeBackwardNode(std::function<void()> hook) : hook_(std::move(hook)) {}
  const char* name() const override { return "before_backward"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    hook_();
    if (sink.needs(0)) sink.add(0, gy);  // passed on, not copied
  }
  void release() override { hook_ = nullptr; }

 private:
  std::function<void()> hook_;
};

class ObserveGradientNode final : public Node {
 public:
  explicit ObserveGradientNode(std::function<void(const Tensor&)> hook) : hook_(std::move(hook)) {}
  const char* name() const override { return "observe_gradient"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    hook_(gy);
    if (sink.needs(0)) sink.add(0, gy);
  }
  void release() override { hook_ = nullptr; }

 private:
  std::function<void(const Tensor&)> hook_;
};

}  // namespace

Variable observeGradient(const Variable& x, std::function<void(const Tensor& grad)> hook) {
  if (!needsGraph({&x})) return x;
  return record(x.data(), std::make_shared<ObserveGradientNode>(std::move(hook)), {&x});
}

Variable beforeBackward(const Variable& x, std::function<void()> hook) {
  if (!needsGraph({&x})) return x;
  // The output shares the input's data: nothing writes either in place.
  return record(x.data(), std::make_shared<BeforeBackwardNode>(std::move(hook)), {&x});
}

}  // namespace dtrain::autograd
