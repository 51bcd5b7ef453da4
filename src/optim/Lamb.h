#pragma once
// LAMB: layer-wise adaptive moments (You et al. 2019, "Large Batch Optimization
// for Deep Learning: Training BERT in 76 minutes", Algorithm 2), Adam's moments
// with a per-layer trust ratio, for large global batches. Per parameter tensor:
//   m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
//   r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   u = r + wd * w                   (decoupled weight decay, added to the update)
//   trust = ||w|| / ||u||            (1 when either norm is 0; phi = identity)
//   w = w - lr * trust * u
// Parameter groups: where weight decay is off for a parameter (--decay-2d-only:
// biases and norm weights) its trust ratio is 1 too (a plain Adam step), as the
// reference BERT implementation excludes the same parameters from both. LARS
// here adapts every tensor and excludes the same parameters from decay only.

#include "optim/Optimizer.h"

namespace dtrain::optim {

struct LambOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;  // the paper's and the reference implementations'
  double weightDecay = 0.0;
};

class Lamb : public Optimizer {
 public:
  Lamb(NamedParameters params, const LambOptions& options);
  const char* name() const override { return "lamb"; }
  std::string describe() const override;
  std::vector<std::string> slotNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  const LambOptions& options() const { return options_; }
  bool usesTensorNorms() const override { return true; }

 protected:
  std::vector<Tensor> initSlots(const Tensor& param) const override;
  void update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
              std::vector<Tensor>& slots) override;
  void accumulateNorms(float* p, const float* g, int64_t n, int64_t step, bool decay,
                       std::vector<Tensor>& slots, double* norms) override;  // ||w||^2, ||u||^2
  void applyWithNorms(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                      std::vector<Tensor>& slots, const double* norms) override;

 private:
  LambOptions options_;
};

}  // namespace dtrain::optim
