#include "federated/PrivacyAccountant.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/Error.h"

namespace dtrain::federated {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)) and log(exp(a) - exp(b)) (a >= b) without overflow.
double logAdd(double a, double b) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  if (lo == kNegInf) return hi;
  return std::log1p(std::exp(lo - hi)) + hi;
}
double logSub(double a, double b) {
  if (b == kNegInf) return a;
  if (a <= b) return kNegInf;
  return std::log(std::expm1(a - b)) + b;
}

// log(erfc(x)), accurate where erfc underflows (Laurent series of the tail).
double logErfc(double x) {
  const double r = std::erfc(x);
  if (r > 0) return std::log(r);
  return -std::log(M_PI) / 2 - std::log(x) - x * x - .5 / (x * x) + .625 / std::pow(x, 4) -
         37. / 24. / std::pow(x, 6) + 353. / 64. / std::pow(x, 8);
}

double logBinomial(double n, double k) {
  return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
}

// log A_alpha for integer alpha: the binomial expansion of
// E_{z~mu0}[((1-q) + q mu1(z)/mu0(z))^alpha].
double logAInt(double q, double sigma, int alpha) {
  double logA = kNegInf;
  for (int i = 0; i <= alpha; ++i) {
    const double coef = logBinomial(alpha, i) + i * std::log(q) + (alpha - i) * std::log1p(-q);
    logA = logAdd(logA, coef + (static_cast<double>(i) * i - i) / (2 * sigma * sigma));
  }
  return logA;
}

// log A_alpha for fractional alpha: the two halves of the integral split at z0, each a
// series in generalized binomial coefficients, summed until the terms are negligible.
double logAFrac(double q, double sigma, double alpha) {
  double logA0 = kNegInf, logA1 = kNegInf;
  const double z0 = sigma * sigma * std::log(1 / q - 1) + .5;
  double logCoef = 0;  // log |binom(alpha, i)|, built term by term with its sign
  bool positive = true;
  for (int i = 0;; ++i) {
    if (i > 0) {
      const double factor = (alpha - (i - 1)) / i;
      logCoef += std::log(std::fabs(factor));
      if (factor < 0) positive = !positive;
    }
    const double j = alpha - i;
    const double logT0 = logCoef + i * std::log(q) + j * std::log1p(-q);
    const double logT1 = logCoef + j * std::log(q) + i * std::log1p(-q);
    const double logE0 = std::log(.5) + logErfc((i - z0) / (M_SQRT2 * sigma));
    const double logE1 = std::log(.5) + logErfc((z0 - j) / (M_SQRT2 * sigma));
    const double logS0 = logT0 + (static_cast<double>(i) * i - i) / (2 * sigma * sigma) + logE0;
    const double logS1 = logT1 + (j * j - j) / (2 * sigma * sigma) + logE1;
    if (positive) {
      logA0 = logAdd(logA0, logS0);
      logA1 = logAdd(logA1, logS1);
    } else {
      logA0 = logSub(logA0, logS0);
      logA1 = logSub(logA1, logS1);
    }
    if (std::max(logS0, logS1) < -30 || i > 100000) break;
  }
  return logAdd(logA0, logA1);
}

}  // namespace

double rdpSampledGaussian(double q, double noiseMultiplier, double alpha) {
  DTRAIN_CHECK(q >= 0 && q <= 1 && alpha > 1 && noiseMultiplier > 0,
               "rdpSampledGaussian: q in [0, 1], alpha > 1, noise > 0");
  if (q == 0) return 0;
  if (q == 1) return alpha / (2 * noiseMultiplier * noiseMultiplier);
  const double logA = alpha == std::floor(alpha)
                          ? logAInt(q, noiseMultiplier, static_cast<int>(alpha))
                          : logAFrac(q, noiseMultiplier, alpha);
  return logA / (alpha - 1);
}

const std::vector<double>& defaultOrders() {
  static const std::vector<double> orders = [] {
    std::vector<double> o;
    for (int x = 1; x < 100; ++x) o.push_back(1 + x / 10.0);
    for (int a = 12; a < 64; ++a) o.push_back(a);
    return o;
  }();
  return orders;
}

double epsilonFromRdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                      double delta, Conversion conversion) {
  DTRAIN_CHECK(delta > 0 && delta < 1 && orders.size() == rdp.size(),
               "epsilonFromRdp: delta in (0, 1), one RDP value per order");
  double best = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k], r = rdp[k];
    double eps;
    if (conversion == Conversion::Classic) {
      eps = r - std::log(delta) / (a - 1);
    } else if (delta * delta + std::expm1(-r) >= 0) {
      eps = 0;  // the KL bound already gives delta
    } else if (a > 1.01) {
      eps = r + std::log1p(-1 / a) - std::log(delta * a) / (a - 1);
    } else {
      continue;  // numerically unstable near alpha = 1, and never the best there
    }
    best = std::min(best, eps);
  }
  return std::max(0.0, best);
}

RdpAccountant::RdpAccountant(std::vector<double> orders)
    : orders_(std::move(orders)), rdp_(orders_.size(), 0.0) {}

void RdpAccountant::step(double q, double noiseMultiplier, int64_t steps) {
  for (size_t k = 0; k < orders_.size(); ++k)
    rdp_[k] += static_cast<double>(steps) * rdpSampledGaussian(q, noiseMultiplier, orders_[k]);
}

double RdpAccountant::epsilon(double delta, Conversion conversion) const {
  return epsilonFromRdp(orders_, rdp_, delta, conversion);
}

}  // namespace dtrain::federated
