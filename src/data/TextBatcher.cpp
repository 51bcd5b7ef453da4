#include "data/TextBatcher.h"

#include <algorithm>
#include <atomic>

#include "core/Error.h"
#include "core/Rng.h"

namespace dtrain::data {
namespace {

__extension__ using U128 = unsigned __int128;

// Uniform in [0, n) over the full 64 bits (Lemire's multiply-shift): Rng::below keeps 32
// bits, too few for a corpus over 4 GiB. Bias n / 2^64, negligible.
int64_t uniformBelow(Rng& rng, int64_t n) {
  return static_cast<int64_t>((static_cast<U128>(rng.next()) * static_cast<uint64_t>(n)) >> 64);
}

// As DistributedSampler's per-epoch seed: the multiplication keeps (seed, t) and
// (seed + 1, t - 1) apart, Rng's splitmix64 seeding decorrelates neighbours.
uint64_t stepSeed(uint64_t seed, int64_t step) {
  return seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step + 1));
}

// True when `t` is the only holder of its storage (Dataset::fill's rule).
bool solelyOwned(const Tensor& t) {
  if (!t.defined() || t.storage().use_count() != 1) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

void ensureBuffer(Tensor& t, const Shape& shape) {
  if (!solelyOwned(t) || t.shape() != shape || !t.isContiguous() || t.dtype() != DType::I32)
    t = Tensor::empty(shape, DType::I32);
}

// Copies the windows at `offsets` of `split` into x (inputs) and y (targets).
void cutWindows(std::span<const uint8_t> split, const std::vector<int64_t>& offsets, int64_t block,
                Batch& out) {
  const Shape shape{static_cast<int64_t>(offsets.size()), block};
  ensureBuffer(out.x, shape);
  ensureBuffer(out.y, shape);
  int32_t* x = out.x.data<int32_t>();
  int32_t* y = out.y.data<int32_t>();
  for (size_t b = 0; b < offsets.size(); ++b) {
    const uint8_t* w = split.data() + offsets[b];
    int32_t* xb = x + static_cast<int64_t>(b) * block;
    int32_t* yb = y + static_cast<int64_t>(b) * block;
    for (int64_t i = 0; i < block; ++i) {
      xb[i] = w[i];
      yb[i] = w[i + 1];
    }
  }
}

}  // namespace

TextBatcher::TextBatcher(std::shared_ptr<const TextCorpus> corpus, TextBatcherConfig config)
    : corpus_(std::move(corpus)), config_(config) {
  DTRAIN_CHECK(corpus_ != nullptr, "TextBatcher: no corpus");
  DTRAIN_CHECK_USAGE(config_.localBatch >= 1, "batch size must be >= 1, got ", config_.localBatch);
  DTRAIN_CHECK_USAGE(config_.worldSize >= 1, "number of workers must be >= 1, got ",
                     config_.worldSize);
  corpus_->requireWindows(config_.block);
}

int64_t TextBatcher::stepsPerEpoch() const {
  return std::max<int64_t>(1, corpus_->trainSize() / (globalBatch() * config_.block));
}

std::vector<int64_t> TextBatcher::offsetsRange(int64_t step, int64_t begin, int64_t count) const {
  DTRAIN_CHECK(step >= 0, "TextBatcher: step must be >= 0, got ", step);
  std::vector<int64_t> out(static_cast<size_t>(count));
  const int64_t block = config_.block;
  if (config_.shuffle) {
    // Draw the global batch's offsets in order and keep [begin, begin + count): every
    // rank sees the same sequence, whatever the world size.
    Rng rng(stepSeed(config_.seed, step));
    const int64_t starts = corpus_->trainSize() - block;  // offsets 0 .. trainSize-block-1
    for (int64_t j = 0; j < begin; ++j) rng.next();
    for (auto& o : out) o = uniformBelow(rng, starts);
  } else {
    const int64_t windows = (corpus_->trainSize() - 1) / block;  // M whole windows
    // (t*G + begin) mod M in 128 bits: t*G may overflow 64 for very long runs.
    const auto first =
        static_cast<int64_t>((static_cast<U128>(step) * static_cast<uint64_t>(globalBatch()) +
                              static_cast<uint64_t>(begin)) %
                             static_cast<uint64_t>(windows));
    for (int64_t j = 0; j < count; ++j) out[j] = ((first + j) % windows) * block;
  }
  return out;
}

std::vector<int64_t> TextBatcher::globalOffsets(int64_t step) const {
  return offsetsRange(step, 0, globalBatch());
}

void TextBatcher::checkRank(int rank) const {
  DTRAIN_CHECK(rank >= 0 && rank < config_.worldSize, "TextBatcher: rank ", rank,
               " out of range [0, ", config_.worldSize, ")");
}

std::vector<int64_t> TextBatcher::offsets(int64_t step, int rank) const {
  checkRank(rank);
  return offsetsRange(step, rank * config_.localBatch, config_.localBatch);
}

Batch TextBatcher::batch(int64_t step, int rank) const {
  Batch b;
  fill(step, rank, b);
  return b;
}

void TextBatcher::fill(int64_t step, int rank, Batch& out) const {
  cutWindows(corpus_->train(), offsets(step, rank), config_.block, out);
}

Position TextBatcher::position(int64_t globalStep) const {
  return {globalStep / stepsPerEpoch(), globalStep % stepsPerEpoch()};
}

std::vector<int64_t> textEvalOffsets(const TextCorpus& corpus, const TextEvalConfig& config) {
  DTRAIN_CHECK_USAGE(config.batch >= 1, "evaluation batch size must be >= 1, got ", config.batch);
  DTRAIN_CHECK_USAGE(config.count >= 1, "number of evaluation batches must be >= 1, got ",
                     config.count);
  corpus.requireWindows(config.block);
  Rng rng(config.seed);
  std::vector<int64_t> out(static_cast<size_t>(config.count * config.batch));
  for (auto& o : out) o = uniformBelow(rng, corpus.validationSize() - config.block);
  return out;
}

std::vector<Batch> textEvalBatches(const TextCorpus& corpus, const TextEvalConfig& config) {
  const std::vector<int64_t> all = textEvalOffsets(corpus, config);
  std::vector<Batch> batches(static_cast<size_t>(config.count));
  for (int64_t i = 0; i < config.count; ++i) {
    const auto begin = all.begin() + i * config.batch;
    cutWindows(corpus.validation(), {begin, begin + config.batch}, config.block, batches[i]);
  }
  return batches;
}

}  // namespace dtrain::data
