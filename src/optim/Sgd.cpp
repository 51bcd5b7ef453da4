#include "optim/Sgd.h"

#include <cmath>

namespace dtrain::optim {

Sgd::Sgd(NamedParameters params, const SgdOptions& o) : Optimizer(std::move(params), o.lr), options_(o) {
  detail::checkHyper(o.momentum >= 0 && o.momentum < 1, "--momentum", o.momentum,
                     "must be in [0, 1)");
  detail::checkHyper(o.dampening >= 0 && o.dampening <= 1, "--dampening", o.dampening,
                     "must be in [0, 1]");
  detail::checkHyper(std::isfinite(o.weightDecay) && o.weightDecay >= 0, "--weight-decay",
                     o.weightDecay, "must be a finite number >= 0");
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw UsageError("invalid --nesterov: Nesterov momentum requires --momentum > 0 and "
                     "--dampening 0");
}

std::string Sgd::describe() const {
  return dtrain::detail::concat("SGD(lr=", lr(), ", momentum=", options_.momentum,
                                ", dampening=", options_.dampening,
                                ", nesterov=", options_.nesterov ? "true" : "false",
                                ", weight_decay=", options_.weightDecay, ")");
}

// Without momentum torch keeps no buffer, and neither do we.
std::vector<std::string> Sgd::slotNames() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

std::vector<Tensor> Sgd::initSlots(const Tensor& param) const {
  if (options_.momentum == 0) return {};
  return {Tensor::zeros(param.shape())};
}

namespace {

// Each line mirrors one torch tensor op of _single_tensor_sgd, in its order:
// d = grad.add(param, alpha=wd); buf.mul_(momentum).add_(d, alpha=1-dampening)
// (buf = d on the first step); d = d.add(buf, alpha=momentum) (nesterov) or buf;
// param.add_(d, alpha=-lr). Free functions over restrict pointers, with the
// variants as template parameters, so every loop is branch-free and vectorizes.
template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgdKernel(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t lo,
               int64_t hi, float wd, float mom, float keep, float negLr) {
  using detail::madd;
  for (int64_t j = lo; j < hi; ++j) {
    const float d = kDecay ? madd(p[j], wd, g[j]) : g[j];
    float step = d;
    if constexpr (kMomentum) {
      const float b = kFirst ? d : madd(d, keep, buf[j] * mom);
      buf[j] = b;
      step = kNesterov ? madd(b, mom, d) : b;
    }
    p[j] = madd(step, negLr, p[j]);
  }
}

template <bool kDecay>
void sgdDispatch(float* p, const float* g, float* buf, int64_t n, bool momentum, bool first,
                 bool nesterov, float wd, float mom, float keep, float negLr) {
  auto run = [&](auto kernel) {
    detail::forRange(n, [=](int64_t lo, int64_t hi) {
      kernel(p, g, buf, lo, hi, wd, mom, keep, negLr);
    });
  };
  if (!momentum)
    run(sgdKernel<kDecay, false, false, false>);
  else if (first)
    run(nesterov ? sgdKernel<kDecay, true, true, true> : sgdKernel<kDecay, true, true, false>);
  else
    run(nesterov ? sgdKernel<kDecay, true, false, true> : sgdKernel<kDecay, true, false, false>);
}

}  // namespace

void Sgd::update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                 std::vector<Tensor>& slots) {
  // Parameter groups (--decay-2d-only): no decay for this parameter.
  const double wdv = decay ? options_.weightDecay : 0.0;
  // Scalars are cast to float as torch does for f32 tensors.
  const float wd = static_cast<float>(wdv);
  const float negLr = static_cast<float>(-lr);
  const float mom = static_cast<float>(options_.momentum);
  const float keep = static_cast<float>(1.0 - options_.dampening);
  const bool momentum = options_.momentum != 0;
  float* buf = momentum ? slots[0].data<float>() : nullptr;
  // torch initializes the buffer to the (decayed) gradient on the first step,
  // without dampening; it skips the decay op when weight_decay is 0 (so an inf
  // parameter stays inf).
  const bool first = step == 1;
  if (wdv != 0)
    sgdDispatch<true>(p, g, buf, n, momentum, first, options_.nesterov, wd, mom, keep, negLr);
  else
    sgdDispatch<false>(p, g, buf, n, momentum, first, options_.nesterov, wd, mom, keep, negLr);
}

}  // namespace dtrain::optim
