#pragma once
// Finite-difference gradient check: compares backward() against central
// differences of L = sum(f(inputs) * W) for a fixed random projection W, which
// exercises the whole Jacobian of f, not just its row sums.
#include <functional>
#include <string>
#include <vector>

#include "autograd/Variable.h"

namespace dtrain::autograd {

struct GradCheckResult {
  bool ok = true;
  double worstError = 0;  // max over elements of |analytic - numeric| / (atol + rtol |numeric|)
  std::string worst;      // "input 1 element 7: analytic 0.12 numeric 0.13"
};

struct GradCheckOptions {
  double eps = 1e-2;
  double atol = 2e-3;
  double rtol = 2e-2;
  uint64_t seed = 1;
};

using GradCheckFn = std::function<Variable(const std::vector<Variable>&)>;

// `inputs` are f32 tensors; every one is checked.
GradCheckResult gradCheck(const GradCheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradCheckOptions& options = {});

}  // namespace dtrain::autograd
