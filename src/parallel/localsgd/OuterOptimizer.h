#pragma once
// The outer step of local SGD / DiLoCo (Douillard et al. 2023): after H inner
// steps the workers' averaged parameter delta is the outer gradient,
//   g = anchor - mean_over_workers(params_now)     (anchor = params at the last sync)
// and the anchor moves by SGD on it, as torch.optim.SGD(momentum=mu,
// nesterov=...) with dampening 0 (its first step sets the buffer to g, the
// same as mu * 0 + g here):
//   buf = mu * buf + g
//   update = nesterov ? g + mu * buf : (mu > 0 ? buf : g)
//   anchor -= lr * update
// lr 1 without momentum is plain model averaging (anchor - g = the mean).
#include <cstddef>
#include <string>

namespace dtrain::parallel::localsgd {

struct OuterOptions {
  bool nesterov = false;  // --outer-optimizer nesterov (else sgd)
  double lr = 1.0;        // --outer-lr
  double momentum = 0.0;  // --outer-momentum
};

class OuterOptimizer {
 public:
  explicit OuterOptimizer(OuterOptions o = {});
  // Whether step() reads and writes a momentum buffer.
  bool hasMomentum() const { return opts_.momentum != 0.0; }
  // anchor[i] -= lr * update(g[i]); `buf` (n floats, or null without momentum)
  // carries the momentum across outer steps.
  void step(float* anchor, const float* g, float* buf, size_t n) const;
  const OuterOptions& options() const { return opts_; }
  std::string describe() const;

 private:
  OuterOptions opts_;
};

}  // namespace dtrain::parallel::localsgd
