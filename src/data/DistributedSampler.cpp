#include "data/DistributedSampler.h"

#include <numeric>

#include "core/Error.h"
#include "core/Rng.h"

namespace dtrain::data {

DistributedSampler::DistributedSampler(SamplerConfig config) : config_(config) {
  DTRAIN_CHECK_USAGE(config_.localBatch >= 1, "batch size must be >= 1, got ", config_.localBatch);
  DTRAIN_CHECK_USAGE(config_.worldSize >= 1, "number of workers must be >= 1, got ",
                     config_.worldSize);
  DTRAIN_CHECK_USAGE(config_.datasetSize >= globalBatch(), "dataset of ", config_.datasetSize,
                     " samples is smaller than one global batch of ", globalBatch(), " (",
                     config_.worldSize, " workers x batch ", config_.localBatch, ")");
}

std::vector<int64_t> DistributedSampler::permutation(int64_t epoch) const {
  DTRAIN_CHECK(epoch >= 0, "sampler: epoch must be >= 0, got ", epoch);
  std::vector<int64_t> perm(static_cast<size_t>(config_.datasetSize));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (!config_.shuffle) return perm;
  // Mixing the epoch through a multiplication keeps (seed, epoch) and (seed + 1, epoch - 1)
  // apart; Rng's splitmix64 seeding then decorrelates neighbouring seeds.
  Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(epoch + 1)));
  for (int64_t i = config_.datasetSize - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

void DistributedSampler::checkStep(int64_t step) const {
  DTRAIN_CHECK(step >= 0 && step < stepsPerEpoch(), "sampler: step ", step, " out of range [0, ",
               stepsPerEpoch(), ")");
}

std::span<const int64_t> DistributedSampler::slice(std::span<const int64_t> perm, int64_t step,
                                                   int rank) const {
  checkStep(step);
  DTRAIN_CHECK(rank >= 0 && rank < config_.worldSize, "sampler: rank ", rank, " out of range [0, ",
               config_.worldSize, ")");
  DTRAIN_CHECK(static_cast<int64_t>(perm.size()) == config_.datasetSize,
               "sampler: permutation has ", perm.size(), " entries, dataset has ",
               config_.datasetSize);
  return perm.subspan(static_cast<size_t>(step * globalBatch() + rank * config_.localBatch),
                      static_cast<size_t>(config_.localBatch));
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch, int64_t step, int rank) const {
  const std::vector<int64_t> perm = permutation(epoch);
  const auto s = slice(perm, step, rank);
  return {s.begin(), s.end()};
}

std::vector<int64_t> DistributedSampler::globalIndices(int64_t epoch, int64_t step) const {
  checkStep(step);
  const std::vector<int64_t> perm = permutation(epoch);
  const auto begin = perm.begin() + step * globalBatch();
  return {begin, begin + globalBatch()};
}

Position DistributedSampler::advance(Position p) const {
  return ++p.step >= stepsPerEpoch() ? Position{p.epoch + 1, 0} : p;
}

}  // namespace dtrain::data
