#include "nn/Init.h"

#include <cmath>

namespace dtrain::nn::init {

int64_t fanIn(const Tensor& w) {
  DTRAIN_CHECK(w.dim() >= 2, "fan-in needs a weight of at least 2 dimensions, got ", shapeStr(w.shape()));
  return w.numel() / w.size(0);
}

int64_t fanOut(const Tensor& w) {
  DTRAIN_CHECK(w.dim() >= 2, "fan-out needs a weight of at least 2 dimensions, got ", shapeStr(w.shape()));
  return w.numel() / w.size(1);
}

void uniform(Tensor& t, float lo, float hi, Rng& rng) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.uniform(lo, hi);
}

void normal(Tensor& t, float mean, float stddev, Rng& rng) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = mean + stddev * rng.normal();
}

void constant(Tensor& t, float value) { t.fill(value); }

void kaimingUniform(Tensor& w, Rng& rng, float gain) {
  float bound = gain * std::sqrt(3.f / static_cast<float>(fanIn(w)));
  uniform(w, -bound, bound, rng);
}

void kaimingNormal(Tensor& w, Rng& rng, float gain) {
  normal(w, 0.f, gain / std::sqrt(static_cast<float>(fanIn(w))), rng);
}

void xavierUniform(Tensor& w, Rng& rng, float gain) {
  float bound = gain * std::sqrt(6.f / static_cast<float>(fanIn(w) + fanOut(w)));
  uniform(w, -bound, bound, rng);
}

void xavierNormal(Tensor& w, Rng& rng, float gain) {
  normal(w, 0.f, gain * std::sqrt(2.f / static_cast<float>(fanIn(w) + fanOut(w))), rng);
}

void torchDefault(Tensor& t, int64_t fanIn, Rng& rng) {
  float bound = fanIn > 0 ? 1.f / std::sqrt(static_cast<float>(fanIn)) : 0.f;
  uniform(t, -bound, bound, rng);
}

}  // namespace dtrain::nn::init
