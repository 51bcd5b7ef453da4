#pragma once
// Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight
// decay, exactly as torch.optim.SGD 1.13.
#include "optim/Optimizer.h"

namespace dtrain::optim {

struct SgdOptions {
  double lr = 0.01;  // torch makes lr required; 0.01 is only a convenience default
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weightDecay = 0.0;
};

class Sgd : public Optimizer {
 public:
  Sgd(NamedParameters params, const SgdOptions& options);
  const char* name() const override { return "sgd"; }
  std::string describe() const override;
  std::vector<std::string> slotNames() const override;
  const SgdOptions& options() const { return options_; }

 protected:
  std::vector<Tensor> initSlots(const Tensor& param) const override;
  void update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
              std::vector<Tensor>& slots) override;

 private:
  SgdOptions options_;
};

}  // namespace dtrain::optim
