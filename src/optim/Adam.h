#pragma once
// Adam and AdamW (decoupled weight decay), exactly as torch.optim.Adam/AdamW 1.13
// (amsgrad off).
#include "optim/Optimizer.h"

namespace dtrain::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;  // torch default: 0 for Adam, 1e-2 for AdamW
};

class Adam : public Optimizer {
 public:
  Adam(NamedParameters params, const AdamOptions& options);
  const char* name() const override { return decoupled_ ? "adamw" : "adam"; }
  std::string describe() const override;
  std::vector<std::string> slotNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(NamedParameters params, const AdamOptions& options, bool decoupled);
  std::vector<Tensor> initSlots(const Tensor& param) const override;
  void update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
              std::vector<Tensor>& slots) override;

 private:
  AdamOptions options_;
  bool decoupled_;  // AdamW: decay the weights directly instead of adding to the grad
};

class AdamW : public Adam {
 public:
  // The default weight decay differs from Adam's, as in torch.
  static AdamOptions defaults() {
    AdamOptions o;
    o.weightDecay = 1e-2;
    return o;
  }
  AdamW(NamedParameters params, const AdamOptions& options = defaults())
      : Adam(std::move(params), options, true) {}
};

}  // namespace dtrain::optim
