#pragma once
// Batches of a byte-level language model: windows of block + 1 bytes cut out of a
// TextCorpus, x = the first block bytes (inputs), y = the next block bytes (targets, x
// shifted by one), both I32 [B, block]. Returned in a data::Batch (its x is I32 here).
//
// Why not a Dataset + DistributedSampler: Dataset is classification-shaped (f32 samples
// of a fixed shape, one label each, a finite index set to permute), while a text
// "sample" is any of ~n overlapping windows with a target per position, drawn at random
// as nanoGPT and the peer (bench/torch_gpt.py) do. Enumerating the n windows as indices
// would make the sampler's O(n) permutation per epoch cost 4 M entries for kjv and still
// not be the peer's sampling, so windows get this small batcher of their own, which keeps
// the sampler contract of DESIGN.md:
//
//   G = W * B           the global batch of W workers with local batch B.
//   shuffle (default)   global step t: an Rng (xoshiro256**) seeded from (seed, t) draws G
//                       offsets in order, each uniform in [0, trainSize - block - 1];
//                       sample j of the global batch is the window at offset j.
//   no shuffle          sample j of step t starts at byte ((t*G + j) mod M) * block, with
//                       M = floor((trainSize - 1) / block) the number of whole windows on
//                       block boundaries: consecutive windows from the start of the train
//                       split, wrapping, reproducible outside dtrain with a slice.
//   rank r              samples [r*B, (r+1)*B) of the global batch.
//
// So the union of the W ranks' local batches at step t, in rank order, is exactly the
// single-worker batch of W*B at step t, and a batch is a pure function of (seed, t,
// rank): resuming needs only the global step (see position()/globalStep()).
// An "epoch" only names a number of steps, max(1, floor(trainSize / (G * block))), the
// steps that show the model about as many bytes as the train split holds.
//
// All methods are const and thread-safe (the corpus is read-only).
#include <cstdint>
#include <memory>
#include <vector>

#include "data/Dataset.h"
#include "data/DistributedSampler.h"
#include "data/TextCorpus.h"

namespace dtrain::data {

struct TextBatcherConfig {
  int64_t localBatch = 1;  // B
  int worldSize = 1;       // W
  int64_t block = 64;      // context length T
  uint64_t seed = 0;
  bool shuffle = true;
};

class TextBatcher {
 public:
  // Throws UsageError for a batch, world size or block < 1, or a corpus whose splits are
  // shorter than one window (TextCorpus::requireWindows).
  TextBatcher(std::shared_ptr<const TextCorpus> corpus, TextBatcherConfig config);

  const TextBatcherConfig& config() const { return config_; }
  const TextCorpus& corpus() const { return *corpus_; }
  int64_t globalBatch() const { return config_.localBatch * config_.worldSize; }
  int64_t stepsPerEpoch() const;

  // Start offsets (into the train split) of the whole global batch of `step`, and of
  // rank `rank`'s slice of it.
  std::vector<int64_t> globalOffsets(int64_t step) const;
  std::vector<int64_t> offsets(int64_t step, int rank) const;

  // Rank `rank`'s batch at global step `step`.
  Batch batch(int64_t step, int rank) const;
  // The same into `out`, reusing its buffers when nothing else holds them (as
  // Dataset::fill: a batch still referenced by an autograd graph is never overwritten).
  void fill(int64_t step, int rank, Batch& out) const;

  // Resume: the global step is the whole state; these map it to and from the (epoch,
  // step within epoch) of the classification loaders, for progress and checkpoints.
  Position position(int64_t globalStep) const;
  int64_t globalStep(Position p) const { return p.epoch * stepsPerEpoch() + p.step; }

 private:
  void checkRank(int rank) const;
  std::vector<int64_t> offsetsRange(int64_t step, int64_t begin, int64_t count) const;

  std::shared_ptr<const TextCorpus> corpus_;
  TextBatcherConfig config_;
};

// The fixed validation batches: `count` batches of `batch` windows of the validation
// split, drawn as the peer draws them (B uniform offsets per batch, in
// [0, validationSize - block - 1], from a generator seeded once with `seed`; an Rng
// here, so the windows are not the peer's but play the same role). The same batches
// whatever the world size, step or training seed, so val loss is comparable between runs.
struct TextEvalConfig {
  int64_t batch = 16;
  int64_t block = 64;
  int64_t count = 20;  // --eval-batches
  uint64_t seed = 42;  // the peer's --eval-seed
};

// Start offsets (into the validation split) of every window, batch after batch.
std::vector<int64_t> textEvalOffsets(const TextCorpus& corpus, const TextEvalConfig& config);
std::vector<Batch> textEvalBatches(const TextCorpus& corpus, const TextEvalConfig& config);

}  // namespace dtrain::data
