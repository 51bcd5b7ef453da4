#include "autograd/Recompute.h"

#include "autograd/Precision.h"

namespace dtrain::autograd {
namespace {

thread_local bool tRecomputing = false;

class RecomputeNode final : public Node {
 public:
  RecomputeNode(Forward fn, Tensor input, bool inputRequiresGrad, Precision p)
      : fn_(std::move(fn)), input_(std::move(input)), inputRequiresGrad_(inputRequiresGrad),
        precision_(p) {}
  const char* name() const override { return "recompute"; }

  void backward(const Tensor& gradOut, GradSink& sink) override {
    Variable y, x;
    {
      EnableGradGuard grad;  // the engine runs backward with grad mode off
      PrecisionScope precision(precision_);
      // A leaf standing for the input: its gradient is the input's.
      x = Variable(input_, inputRequiresGrad_);
      const bool outer = tRecomputing;
      tRecomputing = true;
      try {
        y = fn_(x);
      } catch (...) {
        tRecomputing = outer;
        throw;
      }
      tRecomputing = outer;
    }
    if (!y.requiresGrad()) return;  // nothing inside needs a gradient
    y.backward(gradOut);
    if (sink.needs(0) && x.impl()->grad.defined()) sink.add(0, std::move(x.impl()->grad));
  }

  void release() override {
    fn_ = nullptr;
    input_ = Tensor();
  }

 private:
  Forward fn_;
  Tensor input_;
  bool inputRequiresGrad_;
  Precision precision_;
};

}  // namespace

bool recomputing() { return tRecomputing; }

Variable recompute(const Forward& fn, const Variable& x) {
  if (!gradEnabled()) return fn(x);
  Tensor out;
  {
    NoGradGuard noGrad;  // nothing inside is kept for backward
    out = fn(x.detach()).data();
  }
  // Recorded even when x needs no gradient: the parameters inside may.
  auto node = std::make_shared<RecomputeNode>(fn, x.data(), x.requiresGrad(), precision());
  return record(std::move(out), std::move(node), {&x});
}

}  // namespace dtrain::autograd
