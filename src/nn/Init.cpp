#include "nn/Init.h"

#include <cmath>

namespace dtrain::nn::init {

void uniform(Tensor& t, float lo, float hi, Rng& rng) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
}

void normal(Tensor& t, float mean, float stddev, Rng& rng) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = mean + stddev * rng.normal();
}

void constant(Tensor& t, float value) { t.fill(value); }

void torchDefault(Tensor& t, int64_t fanIn, Rng& rng) {
  float bound = fanIn > 0 ? 1.f / std::sqrt(static_cast<float>(fanIn)) : 0.f;
  uniform(t, -bound, bound, rng);
}

}  // namespace dtrain::nn::init
