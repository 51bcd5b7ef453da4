#include "optim/Lars.h"

#include <cmath>

namespace dtrain::optim {

Lars::Lars(NamedParameters params, const LarsOptions& o)
    : Optimizer(std::move(params), o.lr), options_(o) {
  detail::checkHyper(o.momentum >= 0 && o.momentum < 1, "--momentum", o.momentum,
                     "must be in [0, 1)");
  detail::checkHyper(std::isfinite(o.weightDecay) && o.weightDecay >= 0, "--weight-decay",
                     o.weightDecay, "must be a finite number >= 0");
  detail::checkHyper(std::isfinite(o.trustCoefficient) && o.trustCoefficient > 0,
                     "trust coefficient", o.trustCoefficient, "must be positive");
}

std::string Lars::describe() const {
  return dtrain::detail::concat("LARS(lr=", lr(), ", momentum=", options_.momentum,
                                ", weight_decay=", options_.weightDecay,
                                ", trust_coefficient=", options_.trustCoefficient, ")");
}

std::vector<std::string> Lars::slotNames() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

std::vector<Tensor> Lars::initSlots(const Tensor& param) const {
  if (options_.momentum == 0) return {};
  return {Tensor::zeros(param.shape())};
}

void Lars::update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                  std::vector<Tensor>& slots) {
  double norms[2] = {0, 0};
  accumulateNorms(p, g, n, step, decay, slots, norms);
  applyWithNorms(p, g, n, step, lr, decay, slots, norms);
}

void Lars::accumulateNorms(float* p, const float* g, int64_t n, int64_t, bool, std::vector<Tensor>&,
                           double* norms) {
  // Norms in double: a layer has up to millions of elements.
  double ww = 0, gg = 0;
  for (int64_t j = 0; j < n; ++j) {
    ww += static_cast<double>(p[j]) * p[j];
    gg += static_cast<double>(g[j]) * g[j];
  }
  norms[0] += ww;
  norms[1] += gg;
}

void Lars::applyWithNorms(float* p, const float* g, int64_t n, int64_t, double lr, bool decay,
                          std::vector<Tensor>& slots, const double* norms) {
  // Parameter groups (--decay-2d-only): no decay for this parameter.
  const double wd = decay ? options_.weightDecay : 0.0;
  const double wn = std::sqrt(norms[0]), gn = std::sqrt(norms[1]);
  const double denom = gn + wd * wn;
  const double trust = wn > 0 && denom > 0 ? options_.trustCoefficient * wn / denom : 1.0;
  const float scale = static_cast<float>(lr * trust), wdf = static_cast<float>(wd);
  const float mom = static_cast<float>(options_.momentum);
  float* v = options_.momentum != 0 ? slots[0].data<float>() : nullptr;
  detail::forRange(n, [=](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      const float d = detail::madd(p[j], wdf, g[j]);
      float s = scale * d;
      if (v) {
        s = detail::madd(v[j], mom, s);
        v[j] = s;
      }
      p[j] -= s;
    }
  });
}

std::unique_ptr<Optimizer> makeLars(NamedParameters params, const OptimizerOptions& o) {
  auto reject = [](bool set, const char* flag) {
    if (set) throw UsageError(std::string("option ") + flag + " does not apply to optimizer 'lars'");
  };
  reject(o.dampening.has_value(), "--dampening");
  reject(o.nesterov.value_or(false), "--nesterov");
  reject(o.beta1.has_value(), "--beta1");
  reject(o.beta2.has_value(), "--beta2");
  reject(o.eps.has_value(), "--eps");
  reject(o.lrDecay.has_value(), "--lr-decay");
  reject(o.initialAccumulatorValue.has_value(), "--initial-accumulator-value");
  LarsOptions l;
  l.lr = o.lr.value_or(l.lr);
  l.momentum = o.momentum.value_or(l.momentum);
  l.weightDecay = o.weightDecay.value_or(l.weightDecay);
  return std::make_unique<Lars>(std::move(params), l);
}

}  // namespace dtrain::optim
