#pragma once
// The sampler contract (DESIGN.md): for a seed, the global batch of step t does not
// depend on the number of workers.
//
//   perm(epoch)    a permutation of [0, n): seeded Fisher-Yates with dtrain::Rng seeded
//                  from (seed, epoch); the identity when shuffle is off.
//   G = W * B      the global batch of W workers with local batch B.
//   stepsPerEpoch  floor(n / G). The last n mod G samples of each epoch's permutation
//                  are DROPPED, so every rank runs the same number of full steps and no
//                  collective waits on a rank that ran out of data. (With shuffle on, a
//                  different remainder is dropped each epoch.)
//   step t         global batch perm[t*G, (t+1)*G); rank r gets its slice
//                  [t*G + r*B, t*G + (r+1)*B).
//
// So the union of W workers' local batches at step t is exactly the single-worker batch
// of size W*B at step t. The sampler is a pure function of (seed, epoch, step, rank):
// resuming needs only the epoch and step (see Position), no other state.
#include <cstdint>
#include <span>
#include <vector>

namespace dtrain::data {

struct SamplerConfig {
  int64_t datasetSize = 0;
  int64_t localBatch = 1;  // B
  int worldSize = 1;       // W
  uint64_t seed = 0;
  bool shuffle = true;
};

// Where a run is in the data: what a checkpoint saves to resume.
struct Position {
  int64_t epoch = 0;
  int64_t step = 0;  // next step to run within the epoch
  bool operator==(const Position&) const = default;
};

class DistributedSampler {
 public:
  // Throws UsageError when the dataset is smaller than one global batch.
  explicit DistributedSampler(SamplerConfig config);

  const SamplerConfig& config() const { return config_; }
  int64_t globalBatch() const { return config_.localBatch * config_.worldSize; }
  int64_t stepsPerEpoch() const { return config_.datasetSize / globalBatch(); }
  // Samples dropped at the end of every epoch (n mod G).
  int64_t droppedPerEpoch() const { return config_.datasetSize % globalBatch(); }

  // The epoch's permutation of [0, n) (O(n): compute once per epoch).
  std::vector<int64_t> permutation(int64_t epoch) const;
  // Rank `rank`'s local batch at `step`, as a view into `perm` = permutation(epoch).
  std::span<const int64_t> slice(std::span<const int64_t> perm, int64_t step, int rank) const;
  // The same, self-contained (recomputes the permutation: O(n) per call).
  std::vector<int64_t> indices(int64_t epoch, int64_t step, int rank) const;
  // The whole global batch of a step (the union of all ranks' slices, in rank order).
  std::vector<int64_t> globalIndices(int64_t epoch, int64_t step) const;

  // The position after `p` has run one more step (rolls over to the next epoch).
  Position advance(Position p) const;

 private:
  void checkStep(int64_t step) const;
  SamplerConfig config_;
};

}  // namespace dtrain::data
