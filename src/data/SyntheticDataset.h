#pragma once
// A seeded, deterministic and learnable dataset for tests and benchmarks that must not
// depend on data files. Class c has a fixed random prototype in [0,1]^sampleShape;
// sample i is its class's prototype plus uniform noise in [-noise, noise], clamped to
// [0, 1]. Samples are generated on demand from (seed, i), so any size costs no memory
// and every rank and every run sees the same sample i.
#include <cstdint>
#include <vector>

#include "data/Dataset.h"

namespace dtrain::data {

struct SyntheticConfig {
  int64_t size = 60000;
  Shape sampleShape{1, 28, 28};
  int numClasses = 10;
  float noise = 0.5f;
  uint64_t seed = 0;
};

class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(SyntheticConfig config = {});

  int64_t size() const override { return config_.size; }
  const Shape& sampleShape() const override { return config_.sampleShape; }
  int numClasses() const override { return config_.numClasses; }
  int32_t label(int64_t index) const override;
  void gather(const int64_t* indices, int64_t count, float* x, int32_t* y) const override;

  const SyntheticConfig& config() const { return config_; }

 private:
  SyntheticConfig config_;
  int64_t numel_;
  std::vector<float> prototypes_;  // numClasses x numel
};

}  // namespace dtrain::data
