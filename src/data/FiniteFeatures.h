#pragma once
// Features [N, ...] F32 must be finite: a NaN or infinity in the data turns the
// loss NaN steps later, where it reads like a too-high learning rate. Loaders
// check them once (--dataset npy, arrays handed over from Python); the trainer
// asks again of a batch whose loss turned NaN.
#include <string>

#include "tensor/Tensor.h"

namespace dtrain::data {

// "sample i holds NaN at feature j (flat index k)" for the first non-finite
// value of x [N, ...] F32; "" when there is none (or x is not F32).
std::string firstNonFiniteFeature(const Tensor& x);
// UsageError "<who>: sample i holds NaN at feature j (flat index k); input
// features must be finite numbers" for the first one.
void requireFiniteFeatures(const Tensor& x, const std::string& who);

}  // namespace dtrain::data
