#pragma once
// LARS: layer-wise adaptive rate scaling (You, Gitman, Ginsburg 2017), for the
// large global batches of data-parallel training. Per parameter tensor:
//   trust = eta * ||w|| / (||g|| + wd * ||w||)   (1 when either norm is 0)
//   v     = momentum * v + lr * trust * (g + wd * w)
//   w     = w - v
// so each layer moves by about eta * lr of its own norm whatever its gradient's
// scale. eta (the trust coefficient) is 0.001 as in the paper, which calls for a
// larger --lr than plain SGD (e.g. 1 to 10 instead of 0.05).
#include <memory>

#include "optim/Factory.h"
#include "optim/Optimizer.h"

namespace dtrain::optim {

struct LarsOptions {
  double lr = 1.0;
  double momentum = 0.9;
  double weightDecay = 0.0;
  double trustCoefficient = 0.001;  // eta
};

class Lars : public Optimizer {
 public:
  Lars(NamedParameters params, const LarsOptions& options);
  const char* name() const override { return "lars"; }
  std::string describe() const override;
  std::vector<std::string> slotNames() const override;
  const LarsOptions& options() const { return options_; }
  bool usesTensorNorms() const override { return true; }

 protected:
  std::vector<Tensor> initSlots(const Tensor& param) const override;
  void update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
              std::vector<Tensor>& slots) override;
  void accumulateNorms(float* p, const float* g, int64_t n, int64_t step, bool decay,
                       std::vector<Tensor>& slots, double* norms) override;  // ||w||^2, ||g||^2
  void applyWithNorms(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                      std::vector<Tensor>& slots, const double* norms) override;

 private:
  LarsOptions options_;
};

// The factory's entry (rejects the options LARS does not have).
std::unique_ptr<Optimizer> makeLars(NamedParameters params, const OptimizerOptions& options);

}  // namespace dtrain::optim
