// Elementwise arithmetic and activations.
#include "autograd/Ops.h"
#include "autograd/Precision.h"
#include "autograd/ops/OpUtil.h"
#include "tensor/cpu/Bf16.h"

namespace dtrain::autograd {
namespace {

using detail::contig;
using detail::writeGrad;

void checkSameShape(const Tensor& a, const Tensor& b, const char* op) {
  DTRAIN_CHECK(a.shape() == b.shape(), op, ": shapes ", shapeStr(a.shape()), " and ",
               shapeStr(b.shape()), " differ (no broadcasting)");
}

// a + alpha*b family: gradient of input 0 is gy, of input 1 is sign*gy.
class AddNode final : public Node {
 public:
  explicit AddNode(float sign) : sign_(sign) {}
  const char* name() const override { return sign_ > 0 ? "add" : "sub"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t n = gy.numel();
    const float* g = gy.data<float>();
    for (size_t i = 0; i < 2; ++i) {
      if (sink.needs(i)) detail::writeScaled(sink, i, i == 0 ? 1.f : sign_, g, n);
    }
  }

 private:
  float sign_;
};

class MulNode final : public Node {
 public:
  MulNode(Tensor a, Tensor b) : a_(std::move(a)), b_(std::move(b)) {}
  const char* name() const override { return "mul"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t n = gy.numel();
    if (sink.needs(0))
      writeGrad(sink, 0, n, [&](float* o) { kernels::mul(gy.data<float>(), b_.data<float>(), o, n); });
    if (sink.needs(1))
      writeGrad(sink, 1, n, [&](float* o) { kernels::mul(gy.data<float>(), a_.data<float>(), o, n); });
  }
  void release() override { a_ = b_ = Tensor(); }

 private:
  Tensor a_, b_;
};

class ScaleNode final : public Node {
 public:
  explicit ScaleNode(float alpha) : alpha_(alpha) {}
  const char* name() const override { return "scale"; }
  void backward(const Tensor& gy, GradSink& sink) override {
    detail::writeScaled(sink, 0, alpha_, gy.data<float>(), gy.numel());
  }

 private:
  float alpha_;
};

// Activation whose backward needs one saved tensor (its input or its output).
using BackwardKernel = void (*)(const float*, const float*, float*, int64_t);
class ActivationNode final : public Node {
 public:
  ActivationNode(const char* name, Tensor saved, BackwardKernel kernel)
      : name_(name), saved_(std::move(saved)), kernel_(kernel) {}
  const char* name() const override { return name_; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t n = gy.numel();
    writeGrad(sink, 0, n, [&](float* o) { kernel_(saved_.data<float>(), gy.data<float>(), o, n); });
  }
  void release() override { saved_ = Tensor(); }

 private:
  const char* name_;
  Tensor saved_;
  BackwardKernel kernel_;
};

// gx = gy * dydx with dydx saved in bf16.
class Bf16DerivativeNode final : public Node {
 public:
  Bf16DerivativeNode(const char* name, Tensor dydx) : name_(name), dydx_(std::move(dydx)) {}
  const char* name() const override { return name_; }
  void backward(const Tensor& gy, GradSink& sink) override {
    const int64_t n = gy.numel();
    writeGrad(sink, 0, n, [&](float* o) { kernels::mulBf16(dydx_.data<BFloat16>(), gy.data<float>(), o, n); });
  }
  void release() override { dydx_ = Tensor(); }

 private:
  const char* name_;
  Tensor dydx_;
};

using ForwardKernel = void (*)(const float*, float*, int64_t);
Variable activation(const Variable& x, const char* name, ForwardKernel fwd, BackwardKernel bwd,
                    bool savesInput) {
  Tensor xd = contig(x, name, "input");
  Tensor y = Tensor::empty(xd.shape());
  fwd(xd.data<float>(), y.data<float>(), xd.numel());
  if (!needsGraph({&x})) return Variable(std::move(y));
  auto node = std::make_shared<ActivationNode>(name, savesInput ? xd : y, bwd);
  return record(std::move(y), std::move(node), {&x});
}

Variable addSub(const Variable& a, const Variable& b, float sign) {
  Tensor ad = contig(a, "add", "a"), bd = contig(b, "add", "b");
  checkSameShape(ad, bd, sign > 0 ? "add" : "sub");
  Tensor y = Tensor::empty(ad.shape());
  if (sign > 0) kernels::add(ad.data<float>(), bd.data<float>(), y.data<float>(), y.numel());
  else kernels::sub(ad.data<float>(), bd.data<float>(), y.data<float>(), y.numel());
  if (!needsGraph({&a, &b})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<AddNode>(sign), {&a, &b});
}

}  // namespace

Variable add(const Variable& a, const Variable& b) { return addSub(a, b, 1.f); }
Variable sub(const Variable& a, const Variable& b) { return addSub(a, b, -1.f); }

Variable mul(const Variable& a, const Variable& b) {
  Tensor ad = contig(a, "mul", "a"), bd = contig(b, "mul", "b");
  checkSameShape(ad, bd, "mul");
  Tensor y = Tensor::empty(ad.shape());
  kernels::mul(ad.data<float>(), bd.data<float>(), y.data<float>(), y.numel());
  if (!needsGraph({&a, &b})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<MulNode>(ad, bd), {&a, &b});
}

Variable scale(const Variable& x, float alpha) {
  Tensor xd = contig(x, "scale", "input");
  Tensor y = Tensor::empty(xd.shape());
  kernels::scale(xd.data<float>(), alpha, y.data<float>(), y.numel());
  if (!needsGraph({&x})) return Variable(std::move(y));
  return record(std::move(y), std::make_shared<ScaleNode>(alpha), {&x});
}

Variable relu(const Variable& x) {
  return activation(x, "relu", kernels::relu, kernels::reluBackward, false);
}
Variable sigmoid(const Variable& x) {
  return activation(x, "sigmoid", kernels::sigmoid, kernels::sigmoidBackward, false);
}
Variable tanh(const Variable& x) {
  return activation(x, "tanh", kernels::tanh, kernels::tanhBackward, false);
}
Variable gelu(const Variable& x) {
  Tensor xd = contig(x, "gelu", "input");
  Tensor y = Tensor::empty(xd.shape());
  if (!needsGraph({&x})) {
    kernels::gelu(xd.data<float>(), y.data<float>(), y.numel());
    return Variable(std::move(y));
  }
  // The derivative is computed with the output and saved instead of the input
  // (same memory): the backward is then one multiply, not an erf and an exp.
  // Under bf16 (Precision.h) it is saved in bf16, as the products' operands are.
  if (precision() == Precision::BF16) {
    Tensor half = Tensor::empty(xd.shape(), DType::BF16);
    kernels::geluWithDerivativeBf16(xd.data<float>(), y.data<float>(), half.data<BFloat16>(), y.numel());
    return record(std::move(y), std::make_shared<Bf16DerivativeNode>("gelu", std::move(half)), {&x});
  }
  Tensor dydx = Tensor::empty(xd.shape());
  kernels::geluWithDerivative(xd.data<float>(), y.data<float>(), dydx.data<float>(), y.numel());
  return record(std::move(y), std::make_shared<ActivationNode>("gelu", dydx, kernels::mul), {&x});
}

Variable dropout(const Variable& x, float p, bool training, Rng& rng) {
  DTRAIN_CHECK_USAGE(p >= 0.f && p < 1.f, "dropout probability must be in [0, 1), got ", p);
  if (!training || p == 0.f) return x;
  Tensor xd = contig(x, "dropout", "input");
  Tensor mask = Tensor::empty(xd.shape());
  float* m = mask.data<float>();
  const float keep = 1.f / (1.f - p);
  for (int64_t i = 0; i < mask.numel(); ++i) m[i] = rng.uniform() < p ? 0.f : keep;
  Tensor y = Tensor::empty(xd.shape());
  kernels::mul(xd.data<float>(), m, y.data<float>(), y.numel());
  if (!needsGraph({&x})) return Variable(std::move(y));
  // d(x*mask)/dx = mask: reuse the mul kernel as the backward.
  auto node = std::make_shared<ActivationNode>(
      "dropout", mask, [](const float* mk, const float* gy, float* gx, int64_t n) {
        kernels::mul(mk, gy, gx, n);
      });
  return record(std::move(y), std::move(node), {&x});
}

}  // namespace dtrain::autograd
