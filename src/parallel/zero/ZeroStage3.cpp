// ZeRO stage 3: the parameters sharded too (ZeroDataParallel.h has the design).
#include <algorithm>
#include <set>

#include "autograd/Ops.h"
#include "core/Error.h"
#include "nn/RecomputeModes.h"
#include "parallel/zero/ZeroDataParallel.h"

namespace dtrain::parallel::zero {

namespace {
constexpr int kParamGatherTag = (1 << 19) + (1 << 17);  // + bucket

std::vector<autograd::Variable> trainable(const std::vector<autograd::Variable>& params) {
  std::vector<autograd::Variable> out;
  for (const auto& p : params)
    if (p.requiresGrad()) out.push_back(p);
  return out;
}
}  // namespace

std::vector<FusionBucket> ZeroDataParallel::makeUnitBuckets(nn::Module& model) {
  // A parameter belongs to the one block holding it; one held by several
  // blocks (or by none) goes to the root unit, which stays gathered for the
  // whole forward and backward.
  std::vector<nn::Module*> blocks = nn::sequentialBlocks(model);
  std::map<const void*, int> holders;
  for (nn::Module* m : blocks)
    for (const auto& p : trainable(m->parameters())) ++holders[p.impl()];
  std::vector<std::vector<autograd::Variable>> groups;  // forward order
  std::vector<nn::Module*> modules;
  std::set<const void*> inUnit;
  for (nn::Module* m : blocks) {
    std::vector<autograd::Variable> own;
    for (const auto& p : trainable(m->parameters()))
      if (holders[p.impl()] == 1) own.push_back(p);
    if (own.empty()) continue;  // an activation, a pooling layer
    for (const auto& p : own) inUnit.insert(p.impl());
    groups.push_back(std::move(own));
    modules.push_back(m);
  }
  std::vector<autograd::Variable> root;
  for (const auto& p : trainable(model.parameters()))
    if (!inUnit.count(p.impl())) root.push_back(p);

  // Buckets in backward order: the blocks last to first, then the root; each
  // bucket's parameters in reverse registration order, as backward finishes them.
  std::vector<FusionBucket> buckets;
  const int64_t n = comm_.size();
  auto add = [&](std::vector<autograd::Variable> params, nn::Module* module) {
    FusionBucket b;
    b.params.assign(params.rbegin(), params.rend());
    int64_t size = 0;
    for (const auto& p : b.params) size += p.numel();
    // Padded like a fusion bucket; setup lays the parameters out in it, then
    // shardParameters frees it (a unit's gradients exist only in backward).
    memory::CategoryScope accounted(memory::Category::Gradients);
    b.buffer = Tensor::zeros({(size + n - 1) / n * n});
    buckets.push_back(std::move(b));
    unitModules_.push_back(module);
  };
  for (size_t i = groups.size(); i-- > 0;) add(groups[i], modules[i]);
  if (!root.empty()) add(root, nullptr);
  return buckets;
}

void ZeroDataParallel::shardParameters() {
  gatherWork_.resize(buckets_.size());
  reduced_.resize(buckets_.size());
  inBackward_.assign(buckets_.size(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    releaseParams(b);
    buckets_[b].buffer = Tensor();
    if (nn::Module* m = unitModules_[b])
      m->setForwardWrapper([this, b](const autograd::Variable& x, const nn::Module::Forward& f) {
        return runUnit(b, x, f);
      });
  }
  whole_ = false;
}

autograd::Variable ZeroDataParallel::runUnit(size_t b, const autograd::Variable& x,
                                             const nn::Module::Forward& forward) {
  if (whole_) return forward(x);
  gatherParams(b);
  // Forward runs the blocks from the last bucket down: b - 1 is next.
  if (b > 0 && unitModules_[b - 1]) prefetchParams(b - 1, -1);
  autograd::Variable y = forward(x);
  const bool training = autograd::gradEnabled() && y.requiresGrad();
  // The last block forward runs is the first backward needs: it stays.
  if (!training || b > 0) releaseParams(b);
  if (!training) return y;
  return autograd::beforeBackward(y, [this, b] { enterBackward(b); });
}

void ZeroDataParallel::enterBackward(size_t b) {
  if (inBackward_[b]) return;  // a block used twice: the first use gathered it
  inBackward_[b] = true;
  gatherParams(b);
  allocateGradBucket(b);
  // Backward runs the blocks in bucket order: b + 1 is next (the root unit is
  // already gathered).
  if (b + 1 < buckets_.size() && unitModules_[b + 1]) prefetchParams(b + 1, +1);
}

void ZeroDataParallel::gatherParams(size_t b, bool always) {
  if (gatherWork_[b]) {
    gatherWork_[b]->wait();
    gatherWork_[b].reset();
    evictShard(b);
    return;
  }
  Storage& storage = *paramFlat_[b].storage();
  if (storage.resident() && !always) return;
  storage.reallocate();
  comm::Options o;
  o.tag = kParamGatherTag + static_cast<int>(b);
  comm_.allgather(paramShard_[b].data<float>(), paramFlat_[b].data<float>(),
                  static_cast<size_t>(shardSize(b)), DType::F32, o);
  evictShard(b);
}

void ZeroDataParallel::evictShard(size_t b) {
  if (paramFile_) paramFile_->evict(paramShard_[b].rawData(), paramShard_[b].nbytes());
}

void ZeroDataParallel::prefetchParams(size_t b, int direction) {
  Storage& storage = *paramFlat_[b].storage();
  if (gatherWork_[b] || storage.resident()) return;
  storage.reallocate();
  // The unit after it (in this pass's direction) is read in from the offload file meanwhile.
  const size_t after = b + static_cast<size_t>(direction);
  if (paramFile_ && after < buckets_.size())
    paramFile_->prefetch(paramShard_[after].rawData(), paramShard_[after].nbytes());
  comm::Options o;
  o.tag = kParamGatherTag + static_cast<int>(b);
  gatherWork_[b] = comm_.allgatherAsync(paramShard_[b].data<float>(), paramFlat_[b].data<float>(),
                                        static_cast<size_t>(shardSize(b)), DType::F32, o);
}

void ZeroDataParallel::releaseParams(size_t b) {
  if (gatherWork_[b]) {  // never free memory a collective still writes
    gatherWork_[b]->wait();
    gatherWork_[b].reset();
    evictShard(b);
  }
  paramFlat_[b].storage()->release();
}

void ZeroDataParallel::drainReduced(size_t b) {
  work_[b].reset();
  float* g = gradShard_[b].data<float>();
  const float* r = reduced_[b].data<float>();
  for (int64_t i = 0, n = shardSize(b); i < n; ++i) g[i] += r[i];
  reduced_[b] = Tensor();
  for (auto& p : buckets_[b].params) p.grad() = Tensor();
  buckets_[b].buffer = Tensor();
}

void ZeroDataParallel::drainFinished(bool all) {
  for (size_t b = 0; b < nextLaunch_; ++b) {
    if (!work_[b]) continue;
    if (all) work_[b]->wait();
    else if (!work_[b]->test()) continue;
    drainReduced(b);
  }
}

void ZeroDataParallel::gatherWhole(bool keep) {
  // Every unit's collective on every rank, even where the unit is resident
  // (the reporter may still hold the model an evaluation gathered).
  for (size_t b = 0; b < buckets_.size(); ++b) gatherParams(b, true);
  whole_ = true;
  if (!keep) releaseWhole();
}

void ZeroDataParallel::releaseWhole() {
  for (size_t b = 0; b < buckets_.size(); ++b) releaseParams(b);
  whole_ = false;
}

}  // namespace dtrain::parallel::zero
