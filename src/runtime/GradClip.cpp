#include "runtime/GradClip.h"

#include <cmath>

namespace dtrain::runtime {

double clipGradNorm(nn::Module& model, parallel::Strategy& strategy, double maxNorm) {
  const double norm = std::sqrt(strategy.gradNormSquared(model));
  // torch's coefficient, in float as torch computes it for f32 gradients.
  const float coef = static_cast<float>(maxNorm / (norm + 1e-6));
  if (coef >= 1.0f) return norm;
  strategy.scaleGradients(model, coef);
  return norm;
}

}  // namespace dtrain::runtime
