#include "optim/Adam.h"

#include <cmath>

namespace dtrain::optim {

Adam::Adam(NamedParameters params, const AdamOptions& o) : Adam(std::move(params), o, false) {}

Adam::Adam(NamedParameters params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o.lr), options_(o), decoupled_(decoupled) {
  detail::checkAdamHyper(o.beta1, o.beta2, o.eps, o.weightDecay);
}

std::string Adam::describe() const {
  return dtrain::detail::concat(decoupled_ ? "AdamW" : "Adam", "(lr=", lr(),
                                ", betas=(", options_.beta1, ", ", options_.beta2,
                                "), eps=", options_.eps, ", weight_decay=", options_.weightDecay,
                                ")");
}

std::vector<Tensor> Adam::initSlots(const Tensor& param) const {
  return {Tensor::zeros(param.shape()), Tensor::zeros(param.shape())};
}

namespace {

struct AdamScalars {
  float fb1, fb2, ob1, ob2, wd, shrink, negStepSize, bc2Sqrt, eps;
};

// Each line mirrors one torch tensor op of _single_tensor_adam(w), in its order:
// [adamw: param.mul_(1 - lr*wd)] [adam: grad = grad.add(param, alpha=wd)];
// exp_avg.mul_(b1).add_(grad, alpha=1-b1); exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1-b2);
// denom = (exp_avg_sq.sqrt() / sqrt(bc2)).add_(eps); param.addcdiv_(exp_avg, denom, value=-lr/bc1).
// Restrict pointers and template variants keep the loop branch-free and vectorized.
template <bool kDecoupled, bool kL2>
void adamKernel(float* __restrict p, const float* __restrict g, float* __restrict m,
                float* __restrict v, int64_t lo, int64_t hi, const AdamScalars s) {
  using detail::madd;
  for (int64_t j = lo; j < hi; ++j) {
    const float w = kDecoupled ? p[j] * s.shrink : p[j];
    const float d = kL2 ? madd(w, s.wd, g[j]) : g[j];
    const float mj = madd(d, s.ob1, m[j] * s.fb1);
    const float vj = madd(s.ob2 * d, d, v[j] * s.fb2);
    m[j] = mj;
    v[j] = vj;
    const float denom = std::sqrt(vj) / s.bc2Sqrt + s.eps;
    p[j] = w + s.negStepSize * mj / denom;
  }
}

}  // namespace

void Adam::update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                  std::vector<Tensor>& slots) {
  // Parameter groups (--decay-2d-only): no decay for this parameter.
  const double wdv = decay ? options_.weightDecay : 0.0;
  float* m = slots[0].data<float>();
  float* v = slots[1].data<float>();
  const double b1 = options_.beta1, b2 = options_.beta2;
  // Bias corrections in double from the per-parameter step, as torch computes
  // them in Python floats; element math in f32 with the scalars cast to float.
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(step));
  AdamScalars s;
  s.fb1 = static_cast<float>(b1);
  s.fb2 = static_cast<float>(b2);
  s.ob1 = static_cast<float>(1.0 - b1);
  s.ob2 = static_cast<float>(1.0 - b2);
  s.wd = static_cast<float>(wdv);
  s.shrink = static_cast<float>(1.0 - lr * wdv);
  s.negStepSize = static_cast<float>(-(lr / bc1));
  s.bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  s.eps = static_cast<float>(options_.eps);
  auto run = [&](auto kernel) {
    detail::forRange(n, [=](int64_t lo, int64_t hi) { kernel(p, g, m, v, lo, hi, s); });
  };
  if (decoupled_)
    run(adamKernel<true, false>);
  else if (wdv != 0)
    run(adamKernel<false, true>);
  else
    run(adamKernel<false, false>);
}

}  // namespace dtrain::optim
