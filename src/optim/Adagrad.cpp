#include "optim/Adagrad.h"

#include <cmath>

namespace dtrain::optim {

Adagrad::Adagrad(NamedParameters params, const AdagradOptions& o)
    : Optimizer(std::move(params), o.lr), options_(o) {
  detail::checkHyper(std::isfinite(o.lrDecay) && o.lrDecay >= 0, "--lr-decay", o.lrDecay,
                     "must be a finite number >= 0");
  detail::checkHyper(std::isfinite(o.weightDecay) && o.weightDecay >= 0, "--weight-decay",
                     o.weightDecay, "must be a finite number >= 0");
  detail::checkHyper(std::isfinite(o.initialAccumulatorValue) && o.initialAccumulatorValue >= 0,
                     "--initial-accumulator-value", o.initialAccumulatorValue,
                     "must be a finite number >= 0");
  detail::checkHyper(std::isfinite(o.eps) && o.eps >= 0, "--eps", o.eps,
                     "must be a finite number >= 0");
}

std::string Adagrad::describe() const {
  return dtrain::detail::concat("Adagrad(lr=", lr(), ", lr_decay=", options_.lrDecay,
                                ", weight_decay=", options_.weightDecay,
                                ", initial_accumulator_value=", options_.initialAccumulatorValue,
                                ", eps=", options_.eps, ")");
}

std::vector<Tensor> Adagrad::initSlots(const Tensor& param) const {
  return {Tensor::full(param.shape(), static_cast<float>(options_.initialAccumulatorValue))};
}

namespace {

// Each line mirrors one torch tensor op of _single_tensor_adagrad, in its order:
// grad = grad.add(param, alpha=wd); state_sum.addcmul_(grad, grad, value=1);
// std = state_sum.sqrt().add_(eps); param.addcdiv_(grad, std, value=-clr).
// Restrict pointers and the template variant keep the loop vectorized.
template <bool kDecay>
void adagradKernel(float* __restrict p, const float* __restrict g, float* __restrict sum,
                   int64_t lo, int64_t hi, float wd, float eps, float negClr) {
  using detail::madd;
  for (int64_t j = lo; j < hi; ++j) {
    const float d = kDecay ? madd(p[j], wd, g[j]) : g[j];
    const float s = madd(d, d, sum[j]);
    sum[j] = s;
    p[j] = p[j] + negClr * d / (std::sqrt(s) + eps);
  }
}

}  // namespace

void Adagrad::update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                     std::vector<Tensor>& slots) {
  // Parameter groups (--decay-2d-only): no decay for this parameter.
  const double wdv = decay ? options_.weightDecay : 0.0;
  float* sum = slots[0].data<float>();
  const double clr = lr / (1.0 + static_cast<double>(step - 1) * options_.lrDecay);
  const float negClr = static_cast<float>(-clr);
  const float wd = static_cast<float>(wdv);
  const float eps = static_cast<float>(options_.eps);
  auto run = [&](auto kernel) {
    detail::forRange(n, [=](int64_t lo, int64_t hi) { kernel(p, g, sum, lo, hi, wd, eps, negClr); });
  };
  if (wdv != 0)
    run(adagradKernel<true>);
  else
    run(adagradKernel<false>);
}

}  // namespace dtrain::optim
