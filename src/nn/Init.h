#pragma once
// Deterministic initializers (all draw from the given Rng). The layers'
// defaults follow PyTorch's: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
// (kaiming_uniform with a = sqrt(5)), so training dynamics match the peer.
#include "core/Rng.h"
#include "tensor/Tensor.h"

namespace dtrain::nn::init {

void uniform(Tensor& t, float lo, float hi, Rng& rng);
void normal(Tensor& t, float mean, float stddev, Rng& rng);
void constant(Tensor& t, float value);
// PyTorch's default for Linear/Conv weights and biases.
void torchDefault(Tensor& t, int64_t fanIn, Rng& rng);

}  // namespace dtrain::nn::init
