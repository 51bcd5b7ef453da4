#include "parallel/tensor/Shards.h"

#include <algorithm>
#include <map>

#include "core/Error.h"
#include "core/Memory.h"

namespace dtrain::parallel::tensor {

namespace {
constexpr int kGatherTag = (1 << 20) + 7;
}  // namespace

Shards::Shards(comm::Communicator& group) : group_(group) {
  context_ = std::make_shared<nn::TensorParallelGroup>();
  context_->rank = group.rank();
  context_->size = group.size();
  comm::Communicator* g = &group;
  context_->sum = [g](float* data, int64_t n) {
    g->allreduce(data, data, static_cast<size_t>(n), DType::F32);
  };
  context_->gather = [g](const float* mine, float* all, int64_t n) {
    g->allgather(mine, all, static_cast<size_t>(n), DType::F32);
  };
}

void Shards::cut(nn::Module& modules, optim::Optimizer& optimizer) {
  optimizer_ = &optimizer;
  {
    memory::CategoryScope accounted(memory::Category::Parameters);  // memory_per_rank
    plan_ = nn::tensorParallelize(modules, context_);
  }
  // The cut parameters, trained or frozen (LoRA's base weights): all are
  // gathered and swapped; the trained ones also have optimizer state.
  std::map<std::string, autograd::Variable> byName;
  for (auto& [name, p] : modules.namedParameters()) byName.emplace(name, p);
  for (auto& [name, layout] : plan_) {
    auto it = byName.find(name);
    DTRAIN_CHECK(it != byName.end(), "tensor parallel: no parameter ", name, " to cut");
    cutVars_.push_back(it->second);
    if (const auto index = optimizer.indexOf(name)) cutParams_.push_back(*index);
    // A gradient shaped like the whole tensor would be kept by zeroGrad.
    cutVars_.back().grad() = Tensor();
  }
  // Loaded optimizer state (--load) is whole: cut it as its parameter.
  std::map<std::string, nn::ShardLayout> layouts(plan_.begin(), plan_.end());
  memory::CategoryScope accounted(memory::Category::OptimizerState);
  for (auto& [name, t] : optimizer.namedState()) {
    auto it = layouts.find(name.substr(0, name.rfind('.')));
    if (it != layouts.end() && t->dim() > 0 && t->numel() > 1)
      *t = nn::takeShard(*t, it->second, slice(), size());
  }
}

bool Shards::isCut(size_t optimizerIndex) const {
  return std::find(cutParams_.begin(), cutParams_.end(), optimizerIndex) != cutParams_.end();
}

void Shards::restoreSlices() {
  if (stateSwapped_)
    for (Swap& w : state_) *w.slot = w.slice;
  stateSwapped_ = false;
  if (!paramsSwapped_) return;
  for (size_t k = 0; k < cutVars_.size(); ++k) cutVars_[k].setData(params_[k].slice);
  context_->active = true;
  paramsSwapped_ = false;
}

void Shards::swapInWholeTensors(bool withState) {
  if (!gathered()) return;
  if (!paramsSwapped_) {
    for (size_t k = 0; k < cutVars_.size(); ++k) cutVars_[k].setData(params_[k].whole);
    context_->active = false;  // the layers compute as one process
    paramsSwapped_ = true;
  }
  if (withState && !stateSwapped_) {
    for (Swap& w : state_) *w.slot = w.whole;
    stateSwapped_ = true;
  }
}

void Shards::gather(bool withOptimizer) {
  restoreSlices();
  const bool root = group_.rank() == 0;
  if (withOptimizer) optimizer_->ensureState(cutParams_);
  auto state = withOptimizer ? optimizer_->namedState() : decltype(optimizer_->namedState()){};
  // Everything to gather, in the same order on every rank: each cut parameter,
  // then (for a checkpoint) its optimizer slots shaped like it ("step" is whole).
  struct Item {
    Tensor* slot;
    nn::ShardLayout layout;
    bool isParam;
    size_t index;  // into params_ or state_ (the root's)
  };
  std::vector<Item> items;
  size_t stateCount = 0;
  for (size_t k = 0; k < cutVars_.size(); ++k) {
    items.push_back({&cutVars_[k].data(), plan_[k].second, true, k});
    const std::string prefix = plan_[k].first + ".";
    for (auto& [name, t] : state)
      if (name.compare(0, prefix.size(), prefix) == 0 && t->shape() == items.back().slot->shape())
        items.push_back({t, plan_[k].second, false, stateCount++});
  }
  if (root) {
    params_.resize(cutVars_.size());
    if (withOptimizer) state_.assign(stateCount, Swap{});
  }
  for (Item& it : items) {
    if (!root) {
      group_.send(*it.slot, 0, kGatherTag);
      continue;
    }
    Swap& w = it.isParam ? params_[it.index] : state_[it.index];
    w.slot = it.slot;
    w.slice = *it.slot;
    Shape whole = it.slot->shape();
    whole[it.layout.dim] *= size();
    if (!w.whole.defined() || w.whole.shape() != whole) w.whole = Tensor::empty(whole, it.slot->dtype());
    nn::putShard(w.whole, *it.slot, it.layout, 0, size());
    Tensor piece = Tensor::empty(it.slot->shape(), it.slot->dtype());
    for (int r = 1; r < size(); ++r) {
      group_.recv(piece, r, kGatherTag);
      nn::putShard(w.whole, piece, it.layout, r, size());
    }
  }
}

}  // namespace dtrain::parallel::tensor
