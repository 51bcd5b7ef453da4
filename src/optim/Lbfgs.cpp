#include "optim/Lbfgs.h"

#include <cmath>
#include <sstream>

#include "core/Error.h"

namespace dtrain::optim {

double lbfgsDot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

std::vector<float> lbfgsDirection(const std::vector<float>& g,
                                  const std::deque<std::vector<float>>& s,
                                  const std::deque<std::vector<float>>& y, double hDiag) {
  const size_t m = s.size(), n = g.size();
  std::vector<double> q(n), ro(m), al(m);
  for (size_t j = 0; j < n; ++j) q[j] = -static_cast<double>(g[j]);
  for (size_t k = m; k-- > 0;) {  // newest to oldest
    ro[k] = 1.0 / lbfgsDot(y[k], s[k]);
    double sq = 0;
    for (size_t j = 0; j < n; ++j) sq += s[k][j] * q[j];
    al[k] = sq * ro[k];
    for (size_t j = 0; j < n; ++j) q[j] -= al[k] * y[k][j];
  }
  for (size_t j = 0; j < n; ++j) q[j] *= hDiag;  // r = H0 q
  for (size_t k = 0; k < m; ++k) {  // oldest to newest
    double yr = 0;
    for (size_t j = 0; j < n; ++j) yr += y[k][j] * q[j];
    const double be = yr * ro[k];
    for (size_t j = 0; j < n; ++j) q[j] += s[k][j] * (al[k] - be);
  }
  return std::vector<float>(q.begin(), q.end());
}

Lbfgs::Lbfgs(NamedParameters params, LbfgsOptions o) : Optimizer(std::move(params), o.lr), o_(o) {
  detail::checkHyper(o.history >= 1, "--lbfgs-history", o.history, "must be >= 1");
}

std::string Lbfgs::describe() const {
  std::ostringstream os;
  os << "LBFGS(lr=" << lr() << ", history=" << o_.history << ", line_search=backtracking)";
  return os.str();
}

void Lbfgs::update(float*, const float*, int64_t, int64_t, double, bool, std::vector<Tensor>&) {
  DTRAIN_CHECK(false, "L-BFGS updates every parameter at once (step()), not one by one");
}

std::vector<float> Lbfgs::flatGrad() {
  std::vector<float> g;
  for (size_t i = 0; i < size(); ++i) {
    const Tensor& p = param(i).data();
    const Tensor& gi = param(i).grad();
    if (!gi.defined()) {
      g.insert(g.end(), static_cast<size_t>(p.numel()), 0.0f);
      continue;
    }
    DTRAIN_CHECK(gi.dtype() == DType::F32 && gi.isContiguous() && gi.numel() == p.numel(),
                 "L-BFGS: the gradient of ", paramName(i), " must be a contiguous F32 tensor");
    const float* src = gi.data<float>();
    g.insert(g.end(), src, src + gi.numel());
  }
  return g;
}

void Lbfgs::setParams(const std::vector<float>& x0, const std::vector<float>& d, double t) {
  size_t off = 0;
  for (size_t i = 0; i < size(); ++i) {
    Tensor& p = param(i).data();
    float* dst = p.data<float>();
    for (int64_t j = 0; j < p.numel(); ++j, ++off)
      dst[j] = static_cast<float>(x0[off] + t * d[off]);
  }
}

void Lbfgs::step() {
  DTRAIN_CHECK(lossClosure(), "L-BFGS needs a loss closure (Optimizer::setLossClosure) before step()");
  setStepCount(stepCount() + 1);
  lastEvaluations_ = 0;
  lastT_ = 0;
  const std::vector<float> g = flatGrad();
  double gmax = 0, gsum = 0;
  for (float v : g) {
    gmax = std::max(gmax, static_cast<double>(std::fabs(v)));
    gsum += std::fabs(v);
  }
  if (gmax <= o_.toleranceGrad) return;  // at an optimum of this batch
  std::vector<float> d = lbfgsDirection(g, s_, y_, hDiag_);
  double gtd = lbfgsDot(g, d);
  if (!(gtd < 0)) {  // not a descent direction: forget the history
    s_.clear();
    y_.clear();
    hDiag_ = 1.0;
    for (size_t j = 0; j < g.size(); ++j) d[j] = -g[j];
    gtd = -lbfgsDot(g, g);
  }
  // torch's first step: lr scaled down by |g|_1 (the direction is -g, unscaled).
  double t = s_.empty() ? std::min(1.0, 1.0 / gsum) * lr() : lr();
  std::vector<float> x0;
  for (size_t i = 0; i < size(); ++i) {
    const Tensor& p = param(i).data();
    x0.insert(x0.end(), p.data<float>(), p.data<float>() + p.numel());
  }
  const double f0 = lossNow();
  bool accepted = false;
  double dmax = 0;
  for (float v : d) dmax = std::max(dmax, static_cast<double>(std::fabs(v)));
  // Halve until Armijo holds, or until the step is below float resolution
  // (torch's tolerance_change): no decrease is measurable there.
  for (int trial = 0; trial < o_.maxTrials && t * dmax > 1e-9; ++trial, t *= 0.5) {
    setParams(x0, d, t);
    const double f = lossClosure()();
    ++lastEvaluations_;
    if (std::isfinite(f) && f <= f0 + o_.c1 * t * gtd) {
      accepted = true;
      break;
    }
  }
  if (!accepted) {  // no decrease along d on this batch: stay, start the history again
    setParams(x0, d, 0.0);
    s_.clear();
    y_.clear();
    hDiag_ = 1.0;
    return;
  }
  lastT_ = t;
  const std::vector<float> gNew = flatGrad();
  std::vector<float> sv(g.size()), yv(g.size());
  for (size_t j = 0; j < g.size(); ++j) {
    sv[j] = static_cast<float>(t * d[j]);
    yv[j] = gNew[j] - g[j];
  }
  const double ys = lbfgsDot(yv, sv);
  if (ys > 1e-10) {  // curvature condition: keep the pair
    if (static_cast<int>(s_.size()) == o_.history) {
      s_.pop_front();
      y_.pop_front();
    }
    s_.push_back(std::move(sv));
    y_.push_back(std::move(yv));
    hDiag_ = ys / lbfgsDot(y_.back(), y_.back());
  }
}

namespace {
// "lbfgs@s.3" -> ('s', 3); anything else -> ('\0', -1).
std::pair<char, long> lbfgsKey(const std::string& key) {
  const std::string prefix = "lbfgs@";
  if (key.size() < prefix.size() + 3 || key.compare(0, prefix.size(), prefix) != 0) return {'\0', -1};
  const char which = key[prefix.size()];
  if ((which != 's' && which != 'y') || key[prefix.size() + 1] != '.') return {'\0', -1};
  const std::string digits = key.substr(prefix.size() + 2);
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
    return {'\0', -1};
  return {which, std::stol(digits)};
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Lbfgs::globalState() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < s_.size(); ++k)
    for (const auto& [which, pairs] : {std::pair{"s", &s_}, std::pair{"y", &y_}}) {
      const std::vector<float>& v = (*pairs)[k];
      Tensor t = Tensor::empty({static_cast<int64_t>(v.size())});
      std::copy(v.begin(), v.end(), t.data<float>());
      out.emplace_back("lbfgs@" + std::string(which) + "." + std::to_string(k), t);
    }
  return out;
}

std::vector<std::string> Lbfgs::checkGlobalState(const std::map<std::string, Tensor>& state) const {
  std::vector<std::string> problems;
  int64_t n = 0;
  for (const auto& [name, v] : params()) n += v.data().numel();
  size_t pairs[2] = {0, 0};
  for (const auto& [key, t] : state) {
    const auto [which, k] = lbfgsKey(key);
    if (which == '\0') {
      problems.push_back("unexpected optimizer state optimizer." + key + " (not a state of " + describe() + ")");
      continue;
    }
    ++pairs[which == 's' ? 0 : 1];
    if (t.dtype() != DType::F32 || t.shape() != Shape{n})
      problems.push_back("optimizer state optimizer." + key + " has shape " + shapeStr(t.shape()) + " " +
                         dtypeName(t.dtype()) + ", L-BFGS expects F32 [" + std::to_string(n) +
                         "] (the model's parameters, flat)");
  }
  // Pairs 0..m-1 of both s and y, none missing.
  const size_t m = pairs[0];
  bool whole = pairs[1] == m;
  for (size_t k = 0; whole && k < m; ++k)
    whole = state.count("lbfgs@s." + std::to_string(k)) && state.count("lbfgs@y." + std::to_string(k));
  if (!whole)
    problems.push_back("the L-BFGS history (optimizer.lbfgs@s.<k>, optimizer.lbfgs@y.<k>) is incomplete");
  return problems;
}

void Lbfgs::setGlobalState(const std::map<std::string, Tensor>& state) {
  s_.clear();
  y_.clear();
  hDiag_ = 1.0;
  const size_t m = state.size() / 2;
  // A shorter --lbfgs-history than the saved run's keeps the newest pairs.
  const size_t first = m > static_cast<size_t>(o_.history) ? m - o_.history : 0;
  for (size_t k = first; k < m; ++k) {
    for (auto [which, pairs] : {std::pair{"s", &s_}, std::pair{"y", &y_}}) {
      const Tensor t = state.at("lbfgs@" + std::string(which) + "." + std::to_string(k)).contiguous();
      pairs->emplace_back(t.data<float>(), t.data<float>() + t.numel());
    }
  }
  // hDiag comes from the newest pair (as step() computed it): no need to save it.
  if (!y_.empty()) hDiag_ = lbfgsDot(y_.back(), s_.back()) / lbfgsDot(y_.back(), y_.back());
}

}  // namespace dtrain::optim
