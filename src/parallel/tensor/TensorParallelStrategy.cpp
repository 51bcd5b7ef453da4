#include "parallel/tensor/TensorParallelStrategy.h"

#include <algorithm>

#include "core/Error.h"
#include "core/Log.h"
#include "parallel/MemoryGather.h"
#include "parallel/RankSums.h"
#include "parallel/ReplicaDimension.h"
#include "parallel/allreduce/DataParallel.h"

namespace dtrain::parallel::tensor {

TensorParallel::TensorParallel(comm::Communicator& world, TensorParallelOptions options)
    : world_(world), opts_(std::move(options)), mesh_(world, 1, opts_.size, opts_.spread) {
  DTRAIN_CHECK_USAGE(opts_.size > 1, "--tensor-parallel must be > 1 for the tensor strategy");
  shards_ = std::make_unique<Shards>(*mesh_.tensorGroup());
  if (mesh_.replicas()) {
    DTRAIN_CHECK(opts_.makeDataParallel, "tensor parallel: no data-parallel strategy for dp > 1");
    dataParallel_ = opts_.makeDataParallel(*mesh_.replicas());
  }
}

TensorParallel::~TensorParallel() = default;

bool TensorParallel::ownsProcess() const { return std::string(world_.backend()) != "local"; }

void TensorParallel::setup(nn::Module& model, optim::Optimizer& optimizer) {
  model_ = &model;
  optimizer_ = &optimizer;
  shards_->cut(model, optimizer);
  DTRAIN_CHECK_USAGE(!shards_->plan().empty(), "--tensor-parallel: the model has no layers to cut "
                     "(it needs a Linear -> activation -> Linear run or gpt's attention and MLP)");
  if (opts_.dataParallelBelowCut) {
    const std::vector<std::string> below = nn::dataParallelBelowCut(model, shards_->plan(), shards_->context());
    belowCut_.insert(below.begin(), below.end());
  }
  int64_t cut = 0;
  for (size_t i = 0; i < optimizer.size(); ++i) {
    allParams_.push_back(i);
    floatsHeld_ += optimizer.param(i).data().numel();
    if (shards_->isCut(i)) cut += optimizer.param(i).data().numel();
  }
  if (world_.rank() == 0)
    log::info("tensor parallel: ", mesh_.describe(0), "; ", shards_->plan().size(),
              " parameters cut (", cut, " of ", floatsHeld_, " floats per rank)");
  if (optimizer.usesTensorNorms()) {
    // LARS/LAMB: a cut weight's trust ratio from the norms of all its slices,
    // summed over the group in rank order (the same on every rank); the
    // parameters every rank holds whole keep their own norms.
    std::vector<int64_t> tensorOf(optimizer.size());
    std::vector<char> cutTensor(optimizer.size());
    for (size_t i = 0; i < optimizer.size(); ++i) {
      tensorOf[i] = static_cast<int64_t>(i);
      cutTensor[i] = shards_->isCut(i) ? 1 : 0;
    }
    optimizer.setTensorGroups(std::move(tensorOf), static_cast<int64_t>(optimizer.size()),
                              [this, cutTensor](std::vector<double>& partials) {
                                constexpr int kTensorNormsTag = (1 << 20) + 8;
                                std::vector<double> sums = partials;
                                sumOverRanks(shards_->group(), sums, kTensorNormsTag);
                                for (size_t t = 0; t < cutTensor.size(); ++t)
                                  if (cutTensor[t]) std::copy_n(sums.begin() + 2 * t, 2, partials.begin() + 2 * t);
                              });
  }
  groupBytesAtStart_ = shards_->group().bytesSent();
  if (dataParallel_) {
    dataParallel_->setSpanRecorder(spans_);
    dataParallel_->setup(model, optimizer);
  }
}

void TensorParallel::beginStep(int64_t step) {
  shards_->restoreSlices();
  step_ = step;
  if (dataParallel_) dataParallel_->beginStep(step);
}

void TensorParallel::beginMicroStep(int index, int count) {
  if (dataParallel_) dataParallel_->beginMicroStep(index, count);
}

void TensorParallel::finishGradients() {
  if (dataParallel_) dataParallel_->finishGradients();
  if (!belowCut_.empty()) sumBelowCut();
}

void TensorParallel::sumBelowCut() {
  // The pieces the update reads (whole gradients, or a ZeRO shard's: the
  // group's ranks hold the same ranges), in one message.
  std::vector<GradientPiece> pieces;
  for (GradientPiece& p : heldGradientsOf(dataParallel_.get(), *model_))
    if (belowCut_.count(p.name)) pieces.push_back(std::move(p));
  int64_t n = 0;
  for (const GradientPiece& p : pieces) n += p.grad.numel();
  if (n == 0) return;
  Tensor flat = Tensor::empty({n});
  int64_t off = 0;
  for (const GradientPiece& p : pieces) {
    flat.slice(0, off, off + p.grad.numel()).copyFrom(p.grad);
    off += p.grad.numel();
  }
  shards_->group().allreduce(flat.data<float>(), flat.data<float>(), static_cast<size_t>(n), DType::F32);
  off = 0;
  for (GradientPiece& p : pieces) {
    p.grad.copyFrom(flat.slice(0, off, off + p.grad.numel()));
    off += p.grad.numel();
  }
}

void TensorParallel::applyUpdate(optim::Optimizer& optimizer) {
  if (dataParallel_) dataParallel_->applyUpdate(optimizer);
  else optimizer.step();
  ++steps_;
  if (opts_.gatherEvery > 0 && (step_ + 1) % opts_.gatherEvery == 0) gather(false);
}

void TensorParallel::zeroGradients(nn::Module& model) {
  // The dp strategy knows which gradients it keeps (ZeRO-2: only its buckets').
  if (dataParallel_) dataParallel_->zeroGradients(model);
  else model.zeroGrad();
}

double TensorParallel::gradNormSquared(nn::Module& model) {
  // Gradients are final and dp-averaged here. Each element once: a cut
  // parameter's from every slice, a whole one's from slice 0; from one
  // replica, or from its owner where the dp strategy shards them (ZeRO).
  std::set<std::string> counted;
  for (size_t i : allParams_)
    if (mesh_.coord().slice == 0 || shards_->isCut(i)) counted.insert(optimizer_->paramName(i));
  return countedNormSquared(world_, dataParallel_.get(), model, counted, mesh_.coord().replica == 0);
}

void TensorParallel::scaleGradients(nn::Module& model, float coef) {
  if (dataParallel_) dataParallel_->scaleGradients(model, coef);
  else Strategy::scaleGradients(model, coef);
}

double TensorParallel::reduceMetric(double localValue) {
  // A group's ranks hold the same loss: the world's mean is the replicas' mean.
  return meanOverRanks(world_, localValue);
}

bool TensorParallel::anyRankStops(bool mine) {
  return meanOverRanks(world_, mine ? 1.0 : 0.0) > 0;
}

void TensorParallel::gather(bool withOptimizer) {
  if (withOptimizer) assembleReplicaState(dataParallel_.get(), *model_, *optimizer_, mesh_.coord().replica == 0);
  if (mesh_.coord().replica == 0) shards_->gather(withOptimizer);
}

void TensorParallel::syncModel(nn::Module&, optim::Optimizer* optimizer) {
  shards_->swapInWholeTensors(optimizer != nullptr);
}

void TensorParallel::finish(nn::Module& model, optim::Optimizer& optimizer) {
  // A checkpoint of the last step swapped the whole tensors in (syncModel) with
  // no step after it to cut them again (beginStep).
  shards_->restoreSlices();
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
  s["tensor_parallel"] = mesh_.tp();
  s["tensor_parallel_replicas"] = mesh_.dp();
  s["tp_bytes_sent_per_step"] =
      steps_ ? static_cast<double>(shards_->group().bytesSent() - groupBytesAtStart_) / steps_ : 0.0;
  s["parameters_per_rank"] = static_cast<double>(floatsHeld_);
  return s;
}

}  // namespace dtrain::parallel::tensor
