#pragma once
// Adagrad, exactly as torch.optim.Adagrad 1.13 (dense gradients).
#include "optim/Optimizer.h"

namespace dtrain::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lrDecay = 0.0;
  double weightDecay = 0.0;
  double initialAccumulatorValue = 0.0;
  double eps = 1e-10;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(NamedParameters params, const AdagradOptions& options);
  const char* name() const override { return "adagrad"; }
  std::string describe() const override;
  std::vector<std::string> slotNames() const override { return {"sum"}; }
  const AdagradOptions& options() const { return options_; }

 protected:
  std::vector<Tensor> initSlots(const Tensor& param) const override;
  void update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
              std::vector<Tensor>& slots) override;

 private:
  AdagradOptions options_;
};

}  // namespace dtrain::optim
