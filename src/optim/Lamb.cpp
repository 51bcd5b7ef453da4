#include "optim/Lamb.h"

#include <cmath>

namespace dtrain::optim {

Lamb::Lamb(NamedParameters params, const LambOptions& o)
    : Optimizer(std::move(params), o.lr), options_(o) {
  detail::checkAdamHyper(o.beta1, o.beta2, o.eps, o.weightDecay);
}

std::string Lamb::describe() const {
  return dtrain::detail::concat("LAMB(lr=", lr(), ", betas=(", options_.beta1, ", ",
                                options_.beta2, "), eps=", options_.eps,
                                ", weight_decay=", options_.weightDecay, ")");
}

std::vector<Tensor> Lamb::initSlots(const Tensor& param) const {
  return {Tensor::zeros(param.shape()), Tensor::zeros(param.shape())};
}

namespace {

struct LambScalars {
  float fb1, fb2, ob1, ob2, invBc1, bc2Sqrt, eps, wd;
};

// One element of the update direction u = r + wd * w from the updated moments;
// the norm pass and the apply pass call it on the same floats, so the norm is
// that of the update applied.
inline float lambDirection(float w, float m, float v, const LambScalars& s) {
  const float r = (m * s.invBc1) / (std::sqrt(v) / s.bc2Sqrt + s.eps);
  return detail::madd(s.wd, w, r);
}

}  // namespace

namespace {
LambScalars lambScalars(const LambOptions& o, int64_t step, bool decay) {
  LambScalars s;
  const double b1 = o.beta1, b2 = o.beta2;
  s.fb1 = static_cast<float>(b1);
  s.fb2 = static_cast<float>(b2);
  s.ob1 = static_cast<float>(1.0 - b1);
  s.ob2 = static_cast<float>(1.0 - b2);
  s.invBc1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, static_cast<double>(step))));
  s.bc2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, static_cast<double>(step))));
  s.eps = static_cast<float>(o.eps);
  // Parameter groups (--decay-2d-only): neither decay nor trust ratio here.
  s.wd = decay ? static_cast<float>(o.weightDecay) : 0.0f;
  return s;
}
}  // namespace

void Lamb::update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                  std::vector<Tensor>& slots) {
  double norms[2] = {0, 0};
  accumulateNorms(p, g, n, step, decay, slots, norms);
  applyWithNorms(p, g, n, step, lr, decay, slots, norms);
}

void Lamb::accumulateNorms(float* p, const float* g, int64_t n, int64_t step, bool decay,
                           std::vector<Tensor>& slots, double* norms) {
  float* m = slots[0].data<float>();
  float* v = slots[1].data<float>();
  const LambScalars s = lambScalars(options_, step, decay);
  detail::forRange(n, [=](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      m[j] = detail::madd(g[j], s.ob1, m[j] * s.fb1);
      v[j] = detail::madd(s.ob2 * g[j], g[j], v[j] * s.fb2);
    }
  });
  if (!decay) return;  // trust ratio 1: no norms
  // Norms in double and in one fixed order (a layer has up to millions of
  // elements; the same sum on every rank and every run).
  double ww = 0, uu = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float u = lambDirection(p[j], m[j], v[j], s);
    ww += static_cast<double>(p[j]) * p[j];
    uu += static_cast<double>(u) * u;
  }
  norms[0] += ww;
  norms[1] += uu;
}

void Lamb::applyWithNorms(float* p, const float*, int64_t n, int64_t step, double lr, bool decay,
                          std::vector<Tensor>& slots, const double* norms) {
  const float* m = slots[0].data<float>();
  const float* v = slots[1].data<float>();
  const LambScalars s = lambScalars(options_, step, decay);
  double trust = 1.0;
  if (decay && norms[0] > 0 && norms[1] > 0) trust = std::sqrt(norms[0]) / std::sqrt(norms[1]);
  const float negStep = static_cast<float>(-lr * trust);
  detail::forRange(n, [=](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j)
      p[j] = detail::madd(negStep, lambDirection(p[j], m[j], v[j], s), p[j]);
  });
}

}  // namespace dtrain::optim
