#include "parallel/tensor/TensorParallel.h"

#include <set>

#include "core/Error.h"
#include "core/Log.h"
#include "parallel/MemoryGather.h"
#include "parallel/allreduce/DataParallel.h"
#include "parallel/pipeline/Mesh.h"

namespace dtrain::parallel::tensor {

namespace {
constexpr int kGatherTag = (1 << 20) + 7;

double sumOfSquares(const Tensor& g) {
  if (!g.defined()) return 0;
  const Tensor c = g.contiguous();
  const float* x = c.data<float>();
  double s = 0;
  for (int64_t i = 0, n = c.numel(); i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}
}  // namespace

TensorParallel::TensorParallel(comm::Communicator& world, TensorParallelOptions options)
    : world_(world), opts_(std::move(options)) {
  const int tp = opts_.size;
  DTRAIN_CHECK_USAGE(tp >= 1 && world.size() % tp == 0, world.size(),
                     " ranks are not a multiple of --tensor-parallel ", tp);
  const int dp = world.size() / tp;
  // The pipeline mesh's coordinates with the tensor-parallel rank as the inner
  // ("stage") index: pack puts a group on neighbouring ranks.
  const pipeline::MeshCoord c = pipeline::meshCoord(world.rank(), dp, tp, opts_.spread);
  replica_ = c.replica;
  tpRank_ = c.stage;
  // Both splits are collective over the world, in the same order on every rank.
  group_ = world.split(replica_, tpRank_);
  auto replicas = world.split(tpRank_, replica_);
  if (dp > 1) {
    replicas_ = std::move(replicas);
    DTRAIN_CHECK(opts_.makeDataParallel, "tensor parallel: no data-parallel strategy for dp > 1");
    dataParallel_ = opts_.makeDataParallel(*replicas_);
  }
}

TensorParallel::~TensorParallel() = default;

bool TensorParallel::ownsProcess() const { return std::string(world_.backend()) != "local"; }

void TensorParallel::setup(nn::Module& model, optim::Optimizer& optimizer) {
  optimizer_ = &optimizer;
  context_ = std::make_shared<nn::TensorParallelGroup>();
  context_->rank = tpRank_;
  context_->size = opts_.size;
  comm::Communicator* group = group_.get();
  context_->sum = [group](float* data, int64_t n) {
    group->allreduce(data, data, static_cast<size_t>(n), DType::F32);
  };
  {
    memory::CategoryScope accounted(memory::Category::Parameters);  // memory_per_rank
    plan_ = nn::tensorParallelize(model, context_);
  }
  std::map<std::string, nn::ShardLayout> layouts(plan_.begin(), plan_.end());
  for (size_t i = 0; i < optimizer.size(); ++i) {
    auto it = layouts.find(optimizer.paramName(i));
    (it == layouts.end() ? wholeParams_ : cutParams_).push_back(i);
    floatsHeld_ += optimizer.param(i).data().numel();
  }
  DTRAIN_CHECK(cutParams_.size() == plan_.size(),
               "tensor parallel: a cut parameter is not trained by the optimizer");
  // Loaded optimizer state (--load) is whole: cut it as its parameter.
  memory::CategoryScope accounted(memory::Category::OptimizerState);
  for (auto& [name, t] : optimizer.namedState()) {
    const auto dot = name.rfind('.');
    auto it = layouts.find(name.substr(0, dot));
    if (it != layouts.end() && t->dim() > 0 && t->numel() > 1)
      *t = nn::takeShard(*t, it->second, tpRank_, opts_.size);
  }
  if (world_.rank() == 0) {
    int64_t cut = 0;
    for (size_t i : cutParams_) cut += optimizer.param(i).data().numel();
    log::info("tensor parallel: ", world_.size() / opts_.size, " replica(s) x ", opts_.size,
              " ranks (", opts_.spread ? "spread" : "pack", "), ", plan_.size(),
              " parameters cut (", cut, " of ", floatsHeld_, " floats per rank)");
  }
  groupBytesAtStart_ = group_->bytesSent();
  if (dataParallel_) {
    dataParallel_->setSpanRecorder(spans_);
    dataParallel_->setup(model, optimizer);
  }
}

void TensorParallel::restoreSlices() {
  if (stateSwapped_)
    for (Swap& w : state_) *w.slot = w.slice;
  stateSwapped_ = false;
  if (!paramsSwapped_) return;
  for (size_t k = 0; k < cutParams_.size(); ++k)
    optimizer_->param(cutParams_[k]).setData(params_[k].slice);
  context_->active = true;
  paramsSwapped_ = false;
}

void TensorParallel::swapInWholeTensors(bool withState) {
  if (!paramsSwapped_) {
    for (size_t k = 0; k < cutParams_.size(); ++k)
      optimizer_->param(cutParams_[k]).setData(params_[k].whole);
    context_->active = false;  // the layers compute as one process
    paramsSwapped_ = true;
  }
  if (withState && !stateSwapped_) {
    for (Swap& w : state_) *w.slot = w.whole;
    stateSwapped_ = true;
  }
}

void TensorParallel::beginStep(int64_t step) {
  restoreSlices();
  step_ = step;
  if (dataParallel_) dataParallel_->beginStep(step);
}

void TensorParallel::beginMicroStep(int index, int count) {
  if (dataParallel_) dataParallel_->beginMicroStep(index, count);
}

void TensorParallel::finishGradients() {
  if (dataParallel_) dataParallel_->finishGradients();
}

void TensorParallel::applyUpdate(optim::Optimizer& optimizer) {
  if (dataParallel_) dataParallel_->applyUpdate(optimizer);
  else optimizer.step();
  ++steps_;
  if (opts_.gatherEvery > 0 && (step_ + 1) % opts_.gatherEvery == 0) gather(false);
}

double TensorParallel::gradNormSquared(nn::Module&) {
  // Gradients are final and dp-averaged here; the group's slices partition the
  // cut parameters, the replicated ones are equal on every rank.
  double cut = 0, whole = 0;
  for (size_t i : cutParams_) cut += sumOfSquares(optimizer_->param(i).grad());
  for (size_t i : wholeParams_) whole += sumOfSquares(optimizer_->param(i).grad());
  // The slices' sums in double, exchanged bit for bit (there is no f64
  // reduction) and added in rank order: the same total on every rank.
  std::vector<double> all(static_cast<size_t>(group_->size()));
  group_->allgather(&cut, all.data(), 1, DType::I64);
  for (double x : all) whole += x;
  return whole;
}

double TensorParallel::reduceMetric(double localValue) {
  // A group's ranks hold the same loss: the world's mean is the replicas' mean.
  return meanOverRanks(world_, localValue);
}

void TensorParallel::gather(bool withOptimizer) {
  if (replica_ != 0) return;  // only the reporter's group
  restoreSlices();
  comm::Communicator& g = *group_;
  const bool root = tpRank_ == 0;
  if (withOptimizer) optimizer_->ensureState(cutParams_);
  auto state = withOptimizer ? optimizer_->namedState() : decltype(optimizer_->namedState()){};
  // Everything to gather, in the same order on every rank: each cut parameter,
  // then (for a checkpoint) its optimizer slots ("step" is a scalar, whole).
  struct Item {
    Tensor* slot;
    nn::ShardLayout layout;
    bool isParam;
    size_t index;  // into params_ or state_ (the root's)
  };
  if (root) params_.resize(cutParams_.size());
  std::vector<Item> items;
  size_t stateCount = 0;
  for (size_t k = 0; k < cutParams_.size(); ++k) {
    items.push_back({&optimizer_->param(cutParams_[k]).data(), plan_[k].second, true, k});
    const std::string prefix = plan_[k].first + ".";
    for (auto& [name, t] : state)
      if (name.compare(0, prefix.size(), prefix) == 0 && t->shape() == items.back().slot->shape())
        items.push_back({t, plan_[k].second, false, stateCount++});
  }
  if (root && withOptimizer) state_.resize(stateCount);
  for (Item& it : items) {
    if (!root) {
      g.send(*it.slot, 0, kGatherTag);
      continue;
    }
    Swap& w = it.isParam ? params_[it.index] : state_[it.index];
    w.slot = it.slot;
    w.slice = *it.slot;
    Shape whole = it.slot->shape();
    whole[it.layout.dim] *= opts_.size;
    if (!w.whole.defined() || w.whole.shape() != whole) w.whole = Tensor::empty(whole, it.slot->dtype());
    nn::putShard(w.whole, *it.slot, it.layout, 0, opts_.size);
    Tensor piece = Tensor::empty(it.slot->shape(), it.slot->dtype());
    for (int r = 1; r < opts_.size; ++r) {
      g.recv(piece, r, kGatherTag);
      nn::putShard(w.whole, piece, it.layout, r, opts_.size);
    }
  }
}

void TensorParallel::syncModel(nn::Module&, optim::Optimizer* optimizer) {
  if (params_.empty()) return;  // nothing gathered yet: no step ran
  swapInWholeTensors(optimizer != nullptr);
}

void TensorParallel::finish(nn::Module& model, optim::Optimizer& optimizer) {
  if (dataParallel_) dataParallel_->finish(model, optimizer);
  gather(opts_.gatherOptimizer);
}

std::map<std::string, Tensor> TensorParallel::checkpointState() {
  gather(true);
  return {};
}

std::vector<memory::RankMemory> TensorParallel::gatherMemory(const memory::RankMemory& mine) {
  return allgatherMemory(world_, mine);
}

std::map<std::string, double> TensorParallel::stats() const {
  std::map<std::string, double> s;
  if (dataParallel_) s = dataParallel_->stats();
  s["tensor_parallel"] = opts_.size;
  s["tensor_parallel_replicas"] = world_.size() / opts_.size;
  s["tp_bytes_sent_per_step"] =
      steps_ ? static_cast<double>(group_->bytesSent() - groupBytesAtStart_) / steps_ : 0.0;
  s["parameters_per_rank"] = static_cast<double>(floatsHeld_);
  return s;
}

}  // namespace dtrain::parallel::tensor
