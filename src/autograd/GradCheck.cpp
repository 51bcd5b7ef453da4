#include "autograd/GradCheck.h"

#include <cmath>
#include <sstream>

#include "core/Rng.h"

namespace dtrain::autograd {
namespace {

double project(const Tensor& y, const std::vector<double>& w) {
  Tensor c = y.contiguous();
  const float* p = c.data<float>();
  double s = 0;
  for (int64_t i = 0; i < c.numel(); ++i) s += p[i] * w[i];
  return s;
}

}  // namespace

GradCheckResult gradCheck(const GradCheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradCheckOptions& o) {
  std::vector<Variable> vars;
  for (const Tensor& t : inputs) vars.emplace_back(t.clone(), true);
  Variable y = fn(vars);
  Rng rng(o.seed);
  std::vector<double> w(y.numel());
  for (double& v : w) v = rng.uniform(-1.f, 1.f);
  Tensor wt = Tensor::empty(y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) wt.data<float>()[i] = static_cast<float>(w[i]);
  y.backward(wt);

  GradCheckResult r;
  NoGradGuard noGrad;
  for (size_t k = 0; k < vars.size(); ++k) {
    Tensor& x = vars[k].data();
    const Tensor& g = vars[k].grad();
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float orig = p[i];
      p[i] = orig + static_cast<float>(o.eps);
      double plus = project(fn(vars).data(), w);
      p[i] = orig - static_cast<float>(o.eps);
      double minus = project(fn(vars).data(), w);
      p[i] = orig;
      double numeric = (plus - minus) / (2 * o.eps);
      double analytic = g.defined() ? g.data<float>()[i] : 0.0;
      double err = std::abs(analytic - numeric) / (o.atol + o.rtol * std::abs(numeric));
      if (!(err <= r.worstError)) {  // also catches NaN
        r.worstError = std::isnan(err) ? INFINITY : err;
        std::ostringstream os;
        os << "input " << k << " element " << i << ": analytic " << analytic << " numeric "
           << numeric;
        r.worst = os.str();
      }
    }
  }
  r.ok = r.worstError <= 1.0;
  return r;
}

}  // namespace dtrain::autograd
