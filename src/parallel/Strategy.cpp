// The Strategy defaults that read or scale the gradients the update will use.
#include "parallel/Strategy.h"

namespace dtrain::parallel {

double sumOfSquares(const Tensor& t) {
  if (!t.defined()) return 0;
  const Tensor c = t.contiguous();
  const float* x = c.data<float>();
  double sum = 0;
  for (int64_t i = 0, n = c.numel(); i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

std::vector<GradientPiece> Strategy::heldGradients(nn::Module& model) { return wholeGradients(model); }

std::vector<GradientPiece> wholeGradients(nn::Module& model) {
  std::vector<GradientPiece> pieces;
  for (auto& [name, p] : model.namedParameters()) {
    const Tensor& g = p.grad();
    // Gradients are contiguous (the optimizer requires it); they may be views
    // into fusion buckets, which a flat view keeps.
    if (g.defined()) pieces.push_back({name, 0, g.view({g.numel()})});
  }
  return pieces;
}

double Strategy::gradNormSquared(nn::Module& model) {
  double sum = 0;
  for (const GradientPiece& p : heldGradients(model)) sum += sumOfSquares(p.grad);
  return sum;
}

void Strategy::scaleGradients(nn::Module& model, float coef) {
  for (GradientPiece& p : heldGradients(model)) {
    float* x = p.grad.data<float>();  // in place: the piece is a view
    for (int64_t i = 0, n = p.grad.numel(); i < n; ++i) x[i] *= coef;
  }
}

}  // namespace dtrain::parallel
