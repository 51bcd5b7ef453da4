#include "parallel/localsgd/OuterOptimizer.h"

#include <cmath>
#include <sstream>

#include "core/Error.h"

namespace dtrain::parallel::localsgd {

OuterOptimizer::OuterOptimizer(OuterOptions o) : opts_(o) {
  DTRAIN_CHECK_USAGE(std::isfinite(opts_.lr) && opts_.lr > 0, "--outer-lr must be > 0 (got ", opts_.lr, ")");
  DTRAIN_CHECK_USAGE(opts_.momentum >= 0 && opts_.momentum < 1,
                     "--outer-momentum must be in [0, 1) (got ", opts_.momentum, ")");
}

void OuterOptimizer::step(float* anchor, const float* g, float* buf, size_t n) const {
  const float lr = static_cast<float>(opts_.lr), mu = static_cast<float>(opts_.momentum);
  if (!hasMomentum()) {
    for (size_t i = 0; i < n; ++i) anchor[i] -= lr * g[i];
    return;
  }
  DTRAIN_CHECK(buf != nullptr, "outer optimizer: momentum without a buffer");
  for (size_t i = 0; i < n; ++i) {
    buf[i] = mu * buf[i] + g[i];
    const float update = opts_.nesterov ? g[i] + mu * buf[i] : buf[i];
    anchor[i] -= lr * update;
  }
}

std::string OuterOptimizer::describe() const {
  std::ostringstream s;
  s << (opts_.nesterov ? "nesterov" : "sgd") << " lr " << opts_.lr;
  if (hasMomentum()) s << " momentum " << opts_.momentum;
  return s.str();
}

}  // namespace dtrain::parallel::localsgd
