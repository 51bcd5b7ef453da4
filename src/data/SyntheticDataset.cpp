#include "data/SyntheticDataset.h"

#include <algorithm>

#include "core/Rng.h"

namespace dtrain::data {
namespace {

// Per-sample stream: a distinct seed for every (dataset seed, index).
Rng sampleRng(uint64_t seed, int64_t index) {
  return Rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index) + 1);
}

}  // namespace

SyntheticDataset::SyntheticDataset(SyntheticConfig config) : config_(std::move(config)) {
  DTRAIN_CHECK(config_.size >= 0, "SyntheticDataset: size must be >= 0, got ", config_.size);
  DTRAIN_CHECK(config_.numClasses >= 1, "SyntheticDataset: numClasses must be >= 1, got ",
               config_.numClasses);
  for (int64_t d : config_.sampleShape)
    DTRAIN_CHECK(d >= 1, "SyntheticDataset: bad sample shape ", shapeStr(config_.sampleShape));
  numel_ = shapeNumel(config_.sampleShape);
  // The prototypes come from a stream separate from every per-sample stream.
  Rng rng(~config_.seed);
  prototypes_.resize(static_cast<size_t>(config_.numClasses * numel_));
  for (float& p : prototypes_) p = rng.uniform();
}

int32_t SyntheticDataset::label(int64_t index) const {
  Rng rng = sampleRng(config_.seed, index);
  return static_cast<int32_t>(rng.below(static_cast<uint64_t>(config_.numClasses)));
}

void SyntheticDataset::gather(const int64_t* indices, int64_t count, float* x, int32_t* y) const {
  const float noise = config_.noise;
  for (int64_t i = 0; i < count; ++i) {
    Rng rng = sampleRng(config_.seed, indices[i]);
    const auto c = static_cast<int32_t>(rng.below(static_cast<uint64_t>(config_.numClasses)));
    y[i] = c;
    const float* proto = prototypes_.data() + c * numel_;
    float* out = x + i * numel_;
    for (int64_t j = 0; j < numel_; ++j)
      out[j] = std::clamp(proto[j] + rng.uniform(-noise, noise), 0.0f, 1.0f);
  }
}

}  // namespace dtrain::data
