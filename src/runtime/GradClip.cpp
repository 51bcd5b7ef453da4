#include "runtime/GradClip.h"

#include <cmath>

namespace dtrain::runtime {

double clipGradNorm(nn::Module& model, parallel::Strategy& strategy, double maxNorm) {
  const double norm = std::sqrt(strategy.gradNormSquared(model));
  // torch's coefficient, in float as torch computes it for f32 gradients.
  const float coef = static_cast<float>(maxNorm / (norm + 1e-6));
  if (coef >= 1.0f) return norm;
  for (auto& [name, p] : model.namedParameters()) {
    Tensor& g = p.grad();
    if (!g.defined()) continue;
    // Gradients are contiguous (the optimizer requires it); they may be views
    // into fusion buckets, which scaling in place keeps.
    float* x = g.data<float>();
    for (int64_t i = 0, n = g.numel(); i < n; ++i) x[i] *= coef;
  }
  return norm;
}

}  // namespace dtrain::runtime
