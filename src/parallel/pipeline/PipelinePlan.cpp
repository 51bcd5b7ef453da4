// The plan (the cut, the shapes, what each stage owns and shares) and the
// gather of the stages' parameters to stage 0: PipelineParallel's set-up and
// reporting half (PipelineParallel.cpp runs the steps).
#include <map>
#include <set>

#include "core/Error.h"
#include "core/Log.h"
#include "core/Memory.h"
#include "parallel/ReplicaDimension.h"
#include "parallel/pipeline/PipelineParallel.h"

namespace dtrain::parallel::pipeline {

namespace {
constexpr int kGatherTag = (1 << 20) + 1;  // above every activation, gradient and tied tag
constexpr int kMaxDims = 6;
}  // namespace

void PipelineParallel::plan(const Tensor& microBatch) {
  // With --virtual-stages v the cut is into P*v model chunks, chunk k on stage k % P.
  const int n = static_cast<int>(layers_.size()), pp = mesh_.pp() * opts_.virtualStages;
  // Rank 0 measures; everyone receives the cuts, output shapes and activation
  // bytes: [cuts (chunks)] then per layer [bytes, ndim, dims (kMaxDims)].
  const size_t perLayer = 2 + kMaxDims;
  std::vector<int64_t> msg(pp + n * perLayer, 0);
  if (world_.rank() == 0) {
    std::vector<AnalyticLayer> profile = profileLayers(layers_, microBatch);
    model_->zeroGrad();
    std::vector<double> cost;
    for (auto& p : profile) cost.push_back(p.ms);
    const bool byHand = !cuts_.empty();
    std::vector<int> cuts = byHand ? cuts_ : balancedCuts(cost, pp);
    for (int s = 0; s < pp; ++s) msg[s] = cuts[s];
    for (int i = 0; i < n; ++i) {
      int64_t* m = &msg[pp + i * perLayer];
      DTRAIN_CHECK(profile[i].output.size() <= kMaxDims, "pipeline: layer ", layers_[i].name,
                   " has an output of more than ", kMaxDims, " dimensions");
      m[0] = profile[i].activationBytes;
      m[1] = static_cast<int64_t>(profile[i].output.size());
      for (size_t d = 0; d < profile[i].output.size(); ++d) m[2 + d] = profile[i].output[d];
    }
    planText_ = describePlan(layers_, profile, cuts, byHand, mesh_.pp());
    log::info(planText_, "\n  mesh: ", mesh_.describe(0), ", schedule ",
              scheduleName(opts_.schedule),
              opts_.virtualStages > 1 ? detail::concat(" interleaved (", opts_.virtualStages, " chunks per stage)")
                                      : std::string(),
              ", ", opts_.microBatches, " micro-batches");
  }
  comm::Options o;
  o.root = 0;
  world_.broadcast(msg.data(), msg.size(), DType::I64, o);
  cuts_.assign(msg.begin(), msg.begin() + pp);
  for (int i = 0; i < n; ++i) {
    const int64_t* m = &msg[pp + i * perLayer];
    activationBytes_.push_back(m[0]);
    outputShapes_.push_back(Shape(m + 2, m + 2 + m[1]));
  }
  const int stage = mesh_.coord().stage;
  for (int c = 0; c < opts_.virtualStages; ++c) {
    const int k = c * mesh_.pp() + stage;
    chunkActivationBytes_.push_back(0);
    for (int i = cuts_[k]; i < stageEnd(cuts_, k, n); ++i) chunkActivationBytes_.back() += activationBytes_[i];
  }
  for (int i : layersOf(stage))
    for (auto& [name, module] : layers_[i].modules) stageModules_.add(name, module);
  // Each parameter's owner: the stage of its first use in the layer sequence.
  {
    std::vector<int> stageOf(layers_.size());
    for (int s = 0; s < mesh_.pp(); ++s)
      for (int i : layersOf(s)) stageOf[i] = s;
    std::map<std::string, int> owner;  // parameter name -> stage of its first layer
    for (size_t i = 0; i < layers_.size(); ++i)
      for (const std::string& name : parameterNames({static_cast<int>(i)})) owner.emplace(name, stageOf[i]);
    ownerStage_.assign(optimizer_->size(), -1);
    for (size_t i = 0; i < optimizer_->size(); ++i)
      if (auto it = owner.find(optimizer_->paramName(i)); it != owner.end()) ownerStage_[i] = it->second;
  }
  // Tensor parallelism: this stage's layers only (stage 0 keeps the others
  // whole, to evaluate the gathered model).
  if (shards_) {
    shards_->cut(stageModules_, *optimizer_);
    if (shards_->plan().empty() && mesh_.coord().slice == 0 && mesh_.coord().replica == 0)
      log::info("pipeline stage ", stage, " has no layers to cut: its ", mesh_.tp(),
                " tensor-parallel ranks run it whole");
  }
  // The profile's backward gave rank 0 gradients of every layer: the
  // optimizer updates every parameter whose gradient is defined, so only this
  // stage's may have one.
  std::set<std::string> mine;
  for (auto& [name, p] : stageModules_.namedParameters()) mine.insert(name);
  // Every rank frees the other stages' parameters; the reporter (world rank 0)
  // remembers their shapes and gathers them again to evaluate and save.
  for (size_t i = 0; i < optimizer_->size(); ++i) {
    optimizer_->param(i).grad() = Tensor();  // the profile's, allocated as activations
    if (mine.count(optimizer_->paramName(i))) {
      stageParams_.push_back(i);
      parameterBytes_ += optimizer_->param(i).data().numel() * static_cast<int64_t>(sizeof(float));
      continue;
    }
    others_.push_back(i);
    otherShapes_.push_back(optimizer_->param(i).shape());
  }
  releaseOthers();
  // Parameters this stage shares with another (tied weights): a layer
  // sequence's one tie, gpt's wte, joins its first and its last layer
  // (nn/LayerSequence.h), so stage 0 and the last stage.
  if ((stage == 0 || stage == lastStage()) && lastStage() != 0) {
    const std::set<std::string> peers = parameterNames(layersOf(stage == 0 ? lastStage() : 0));
    for (size_t i = 0; i < optimizer_->size(); ++i)
      if (mine.count(optimizer_->paramName(i)) && peers.count(optimizer_->paramName(i))) tied_.push_back(i);
  }
  if (dataParallel_) {
    // The tied weights' gradients are exchanged piece by piece after the dp
    // strategy averaged them (exchangeTiedGradients): the pieces must match.
    std::vector<std::string> tiedNames;
    for (size_t i : tied_) tiedNames.push_back(optimizer_->paramName(i));
    dataParallel_->isolateParameters(tiedNames);
    dataParallel_->setup(stageModules_, *optimizer_);
    dataParallel_->setSpanRecorder(spans_);
    dataParallel_->beginStep(step_);
  }
  // The stage's gradient buffers, counted as gradients (memory_per_rank): the
  // step's zeroGradients ran before the plan knew the stage.
  memory::CategoryScope gradients(memory::Category::Gradients);
  zeroGradients(*model_);
}

std::vector<int> PipelineParallel::layersOf(int stage) const {
  std::vector<int> out;
  const int n = static_cast<int>(layers_.size());
  for (int k = stage; k < static_cast<int>(cuts_.size()); k += mesh_.pp())
    for (int i = cuts_[k]; i < stageEnd(cuts_, k, n); ++i) out.push_back(i);
  return out;
}

std::set<std::string> PipelineParallel::parameterNames(const std::vector<int>& layers) const {
  nn::ModuleGroup g;
  for (int i : layers)
    for (auto& [name, module] : layers_[i].modules) g.add(name, module);
  std::set<std::string> out;
  for (auto& [name, p] : g.namedParameters()) out.insert(name);
  return out;
}

std::vector<size_t> PipelineParallel::ownedBy(int stage) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < ownerStage_.size(); ++i)
    if (ownerStage_[i] == stage) out.push_back(i);
  return out;
}

void PipelineParallel::gatherToStageZero(bool withOptimizer) {
  if (cuts_.empty() || outputShapes_.empty()) return;  // no step ran: nothing changed
  // Already gathered after this step (the end's evaluation, then --save).
  if (gatheredStep_ == step_ && (gatheredOptimizer_ || !withOptimizer)) return;
  gatheredStep_ = step_;
  gatheredOptimizer_ = withOptimizer;
  if (world_.rank() == 0) {
    // The other stages' parameters, back from releaseOthers() (before any
    // optimizer state is shaped after them).
    memory::CategoryScope accounted(memory::Category::Parameters);
    for (size_t k = 0; k < others_.size(); ++k)
      if (optimizer_->param(others_[k]).data().numel() == 0)
        optimizer_->param(others_[k]).data() = Tensor::empty(otherShapes_[k], DType::F32);
  }
  if (withOptimizer) assembleReplicaState(dataParallel_.get(), stageModules_, *optimizer_, mesh_.coord().replica == 0);
  if (mesh_.coord().replica != 0) return;  // the reporter's pipeline only
  if (shards_) {
    // Each stage's group assembles its whole tensors on slice 0, which swaps
    // them in; the slice-0 pipeline then gathers whole tensors as without it.
    shards_->gather(withOptimizer);
    if (mesh_.coord().slice != 0) return;
    shards_->swapInWholeTensors(withOptimizer);
  }
  comm::Communicator& pipe = mesh_.pipeline();
  const int stage = mesh_.coord().stage;
  for (int s = 1; s < mesh_.pp(); ++s) {
    if (stage != 0 && stage != s) continue;
    const std::vector<size_t> owned = ownedBy(s);
    if (withOptimizer) optimizer_->ensureState(owned);
    std::vector<Tensor*> tensors;
    for (size_t i : owned) tensors.push_back(&optimizer_->param(i).data());
    if (withOptimizer)
      for (auto& [name, t] : optimizer_->namedState(owned)) tensors.push_back(t);
    for (Tensor* t : tensors) {
      if (stage == s) pipe.send(*t, 0, kGatherTag);
      else pipe.recv(*t, s, kGatherTag);
    }
  }
}

void PipelineParallel::releaseOthers() {
  for (size_t i : others_) optimizer_->param(i).data() = Tensor::empty({0}, DType::F32);
  // A loaded checkpoint gave every rank every stage's optimizer state, and a
  // gather for saving the reporter: keep only this stage's.
  optimizer_->resetState(others_);
}

}  // namespace dtrain::parallel::pipeline
