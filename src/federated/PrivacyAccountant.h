#pragma once
// Renyi-DP accountant of the Poisson-subsampled Gaussian mechanism (Mironov, Talwar
// and Zhang 2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism"), the
// analysis of TF Privacy's compute_rdp and Opacus' RDP accountant: each step samples
// every element with probability q and adds Gaussian noise of noise multiplier z;
// RDP composes additively over steps; epsilon at delta is the best over the orders.
#include <cstdint>
#include <vector>

namespace dtrain::federated {

// RDP of one step at order alpha (> 1; integer and fractional orders).
double rdpSampledGaussian(double q, double noiseMultiplier, double alpha);

// The orders TF Privacy's compute_dp_sgd_privacy evaluates: 1.1, 1.2, ..., 10.9, 12..63.
const std::vector<double>& defaultOrders();

enum class Conversion {
  Classic,   // eps = rdp - log(delta) / (alpha - 1) (Mironov 2017, Prop. 3)
  Improved,  // eps = rdp + log1p(-1/alpha) - log(delta alpha) / (alpha - 1) (Balle et al. 2020)
};

// Epsilon at delta after the RDP values `rdp` (one per order in `orders`).
double epsilonFromRdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                      double delta, Conversion conversion = Conversion::Improved);

// Accumulates steps of the same mechanism (or different q and z) and reports epsilon.
class RdpAccountant {
 public:
  explicit RdpAccountant(std::vector<double> orders = defaultOrders());
  void step(double q, double noiseMultiplier, int64_t steps = 1);
  double epsilon(double delta, Conversion conversion = Conversion::Improved) const;

 private:
  std::vector<double> orders_, rdp_;
};

}  // namespace dtrain::federated
