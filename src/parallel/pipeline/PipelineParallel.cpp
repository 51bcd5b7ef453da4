#include "parallel/pipeline/PipelineParallel.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/Error.h"
#include "core/Timer.h"
#include "parallel/MemoryGather.h"
#include "parallel/RankSums.h"
#include "parallel/ReplicaDimension.h"

namespace dtrain::parallel::pipeline {

using autograd::Variable;

namespace {

constexpr int kTiedTag = 1 << 20;  // above every activation and gradient tag

// Tags of a step's messages: the activation entering model chunk k for
// micro-batch m, and the gradient of chunk k's output, alternating between two
// ranges by step parity so that a fast stage's next step never matches this
// step's receives (`count` = micro-batches x chunks).
int activationTag(int64_t step, int k, int m, int micro, int count) {
  return static_cast<int>(step % 2) * 2 * count + k * m + micro;
}
int gradientTag(int64_t step, int k, int m, int micro, int count) {
  return activationTag(step, k, m, micro, count) + count;
}

// Records a span named "<prefix><micro>" on the compute lane.
struct OpSpan {
  SpanRecorder* rec;
  std::string name;
  double t0;
  OpSpan(SpanRecorder* r, const char* prefix, int micro)
      : rec(r), name(r ? prefix + std::to_string(micro) : std::string()), t0(r ? nowMicros() : 0) {}
  ~OpSpan() {
    if (rec) rec->span(name, "pipeline", Lane::Compute, t0, nowMicros());
  }
};

}  // namespace

PipelineParallel::PipelineParallel(comm::Communicator& world, PipelineOptions options)
    : world_(world),
      opts_(std::move(options)),
      mesh_(world, opts_.stages, opts_.tensorParallel, opts_.spread) {
  if (mesh_.tensorGroup()) shards_ = std::make_unique<tensor::Shards>(*mesh_.tensorGroup());
  if (mesh_.replicas()) {
    DTRAIN_CHECK(opts_.makeDataParallel, "pipeline: dp > 1 needs a data-parallel strategy");
    dataParallel_ = opts_.makeDataParallel(*mesh_.replicas());
  }
}

PipelineParallel::~PipelineParallel() = default;

bool PipelineParallel::ownsProcess() const { return std::string(world_.backend()) != "local"; }

void PipelineParallel::setup(nn::Module& model, optim::Optimizer& optimizer) {
  model_ = &model;
  optimizer_ = &optimizer;
  layers_ = nn::layerSequence(model);
  // Checked on every rank alike, before anything collective.
  cuts_ = cutsFromSplit(opts_.split, static_cast<int>(layers_.size()), mesh_.pp() * opts_.virtualStages,
                        opts_.virtualStages > 1 ? "--pipeline-stages x --virtual-stages" : "--pipeline-stages");
}

void PipelineParallel::beginStep(int64_t step) {
  if (shards_) shards_->restoreSlices();  // after a gather, slice 0 held whole tensors
  // The reporter's gathered copy of the other stages served its evaluation or checkpoint.
  if (gatheredStep_ >= 0) {
    releaseOthers();
    gatheredStep_ = -1;
  }
  step_ = step;
  if (dataParallel_ && !cuts_.empty() && !outputShapes_.empty()) dataParallel_->beginStep(step);
}

double PipelineParallel::forwardBackward(nn::Module& model, const StepWork& w) {
  const int m = opts_.microBatches;
  const int64_t rows = w.x.size(0);
  DTRAIN_CHECK(rows % m == 0, "pipeline: a batch of ", rows, " samples does not cut into ", m,
               " micro-batches");
  const int64_t mb = rows / m;
  auto micro = [&](const Tensor& t, int i) { return t.slice(0, i * mb, (i + 1) * mb).contiguous(); };
  if (outputShapes_.empty()) plan(micro(w.x, 0));

  const int stage = mesh_.coord().stage, p = mesh_.pp(), v = opts_.virtualStages;
  const int chunks = p * v, count = m * chunks;
  const int next = (stage + 1) % p, prev = (stage + p - 1) % p;  // chunk k+1's and k-1's stage
  comm::Communicator& pipe = mesh_.pipeline();
  Timer stepTimer;
  double idleUs = 0;

  // Every receive of the step, posted now (the shapes are the plan's), per
  // (chunk c of this stage, micro-batch): its input unless it is the model's
  // first chunk, its output's gradient unless it is the last.
  auto at = [m](int c, int i) { return c * m + i; };
  std::vector<Tensor> inputs(v * m), outputGrads(v * m);
  std::vector<comm::WorkPtr> inputReady(v * m), gradReady(v * m);
  for (int c = 0; c < v; ++c) {
    const int k = c * p + stage;
    for (int i = 0; i < m; ++i) {
      if (k > 0) {
        Tensor& t = inputs[at(c, i)] = Tensor::empty(outputShapes_[cuts_[k] - 1], DType::F32);
        inputReady[at(c, i)] = pipe.irecv(t.data<float>(), t.numel(), DType::F32, prev,
                                          activationTag(step_, k, m, i, count));
      }
      if (k < chunks - 1) {
        Tensor& t = outputGrads[at(c, i)] = Tensor::empty(outputShapes_[cuts_[k + 1] - 1], DType::F32);
        gradReady[at(c, i)] = pipe.irecv(t.data<float>(), t.numel(), DType::F32, next,
                                         gradientTag(step_, k, m, i, count));
      }
    }
  }
  auto wait = [&](comm::WorkPtr& work, const char* what, int i) {
    OpSpan s(w.spans, what, i);
    const double t0 = nowMicros();
    work->wait();
    idleUs += nowMicros() - t0;
  };
  std::vector<std::pair<comm::WorkPtr, Tensor>> sends;  // kept alive until sent
  std::vector<Variable> stageInputs(v * m), stageOutputs(v * m);
  double lossSum = 0;
  bool finite = true;
  int64_t heldBytes = 0;
  const Tensor seed = Tensor::full({1}, 1.0f / static_cast<float>(m));

  for (const PipeOp& op : stageOps(opts_.schedule, stage, p, m, v)) {
    const int i = op.micro, c = op.chunk, k = c * p + stage, slot = at(c, i);
    const int begin = cuts_[k], end = stageEnd(cuts_, k, static_cast<int>(layers_.size()));
    if (op.forward) {
      Variable in;
      if (k == 0) {
        in = Variable(micro(w.x, i));
      } else {
        wait(inputReady[slot], "wait activation ", i);
        in = Variable(inputs[slot], true);
      }
      OpSpan s(w.spans, "F", i);
      Variable h = in;
      for (int l = begin; l < end; ++l) h = layers_[l].forward(h);
      if (k == chunks - 1) {
        h = w.lossFromOutput(h, micro(w.y, i));
        const float l = h.item();
        finite = finite && std::isfinite(l);
        lossSum += l;
      } else {
        Tensor out = h.data().contiguous();
        sends.emplace_back(pipe.isend(out.data<float>(), out.numel(), DType::F32, next,
                                      activationTag(step_, k + 1, m, i, count)),
                           out);
      }
      stageInputs[slot] = in;
      stageOutputs[slot] = h;
      heldBytes += chunkActivationBytes_[c];
      peakActivationBytes_ = std::max(peakActivationBytes_, heldBytes);
    } else {
      if (k < chunks - 1) wait(gradReady[slot], "wait gradient ", i);
      // Each chunk's last backward (micro-batch M-1) makes its gradients final.
      if (dataParallel_) dataParallel_->beginMicroStep(i, m);
      OpSpan s(w.spans, "B", i);
      // A first stage without parameters (mlp's Flatten alone) has nothing to differentiate.
      if (finite && stageOutputs[slot].requiresGrad()) {
        if (k == chunks - 1) stageOutputs[slot].backward(seed.reshape(stageOutputs[slot].shape()));
        else stageOutputs[slot].backward(outputGrads[slot]);
      }
      if (k > 0) {
        Tensor g = stageInputs[slot].grad().defined() ? stageInputs[slot].grad().contiguous()
                                                      : Tensor::zeros(inputs[slot].shape(), DType::F32);
        sends.emplace_back(pipe.isend(g.data<float>(), g.numel(), DType::F32, prev,
                                      gradientTag(step_, k - 1, m, i, count)),
                           g);
      }
      stageInputs[slot] = Variable();
      stageOutputs[slot] = Variable();  // frees the micro-batch's graph
      heldBytes -= chunkActivationBytes_[c];
    }
  }
  for (auto& [work, t] : sends) work->wait();
  ++measuredSteps_;  // stepTimer started after the plan: its profile is not pipeline time
  idleUs_ += idleUs;
  busyUs_ += stepTimer.seconds() * 1e6;
  if (stage != lastStage()) return 0;
  return finite ? lossSum / m : std::nan("");
}

void PipelineParallel::exchangeTiedGradients() {
  if (tied_.empty()) return;
  const int stage = mesh_.coord().stage;
  const int peer = stage == 0 ? lastStage() : 0;
  comm::Communicator& pipe = mesh_.pipeline();
  std::set<std::string> tiedNames;
  for (size_t i : tied_) tiedNames.insert(optimizer_->paramName(i));
  // The pieces this rank holds of each tied gradient: whole ones, or with ZeRO
  // the owned range, which isolateParameters made the same on both stages.
  std::vector<GradientPiece> pieces;
  for (GradientPiece& p : heldGradientsOf(dataParallel_.get(), stageModules_))
    if (tiedNames.count(p.name)) pieces.push_back(std::move(p));
  std::vector<int64_t> layout;
  for (const GradientPiece& p : pieces) layout.insert(layout.end(), {p.offset, p.grad.numel()});
  std::vector<int64_t> theirLayout(layout.size());
  auto sentLayout = pipe.isend(layout.data(), layout.size(), DType::I64, peer, kTiedTag);
  pipe.recv(theirLayout.data(), theirLayout.size(), DType::I64, peer, kTiedTag);
  sentLayout->wait();
  DTRAIN_CHECK(layout == theirLayout, "pipeline: the stages hold different pieces of the tied weights");
  for (GradientPiece& p : pieces) {
    Tensor mine = p.grad.clone(), theirs = Tensor::empty(p.grad.shape(), DType::F32);
    auto sent = pipe.isend(mine.data<float>(), mine.numel(), DType::F32, peer, kTiedTag);
    pipe.recv(theirs.data<float>(), theirs.numel(), DType::F32, peer, kTiedTag);
    sent->wait();
    // Stage 0 adds (embedding + head), the last stage (head + embedding): the
    // same two floats, so the same sum on both.
    float* out = p.grad.data<float>();
    const float* a = stage == 0 ? mine.data<float>() : theirs.data<float>();
    const float* b = stage == 0 ? theirs.data<float>() : mine.data<float>();
    for (int64_t k = 0, n = p.grad.numel(); k < n; ++k) out[k] = a[k] + b[k];
  }
}

void PipelineParallel::finishGradients() {
  if (dataParallel_) dataParallel_->finishGradients();
  exchangeTiedGradients();
}

void PipelineParallel::zeroGradients(nn::Module&) {
  // Only this stage's: zeroing the others would give them gradients (Module::zeroGrad
  // allocates zeros for undefined ones), which the optimizer would then apply.
  // The dp strategy knows which of them it keeps (ZeRO-2: only its buckets').
  if (dataParallel_ && !outputShapes_.empty()) dataParallel_->zeroGradients(stageModules_);
  else stageModules_.zeroGrad();
}

void PipelineParallel::applyUpdate(optim::Optimizer& optimizer) {
  // The dp strategy updates (ZeRO: its shard, then allgathers); without one
  // this stage's parameters.
  if (dataParallel_) dataParallel_->applyUpdate(optimizer);
  else optimizer.step(stageParams_);
  // The reporter evaluates after this step: it needs every stage's parameters.
  if (opts_.gatherEvery > 0 && (step_ + 1) % opts_.gatherEvery == 0) gatherToStageZero(false);
}

double PipelineParallel::gradNormSquared(nn::Module&) {
  // Each parameter once: its owner stage's (not a tied copy), a tensor-parallel
  // cut one from every slice, a whole one from slice 0; each element from one
  // replica, or from its owner where the dp strategy shards (ZeRO).
  const std::vector<size_t> owned = ownedBy(mesh_.coord().stage);
  std::set<std::string> counted;
  for (size_t i : owned)
    if (mesh_.coord().slice == 0 || (shards_ && shards_->isCut(i))) counted.insert(optimizer_->paramName(i));
  return countedNormSquared(world_, dataParallel_.get(), stageModules_, counted, mesh_.coord().replica == 0);
}

void PipelineParallel::scaleGradients(nn::Module&, float coef) {
  if (dataParallel_) dataParallel_->scaleGradients(stageModules_, coef);
  else Strategy::scaleGradients(stageModules_, coef);
}

double PipelineParallel::reduceMetric(double localValue) {
  // Only the last stages compute losses (every slice the same): their mean over the replicas.
  const bool counts = mesh_.coord().stage == lastStage() && mesh_.coord().slice == 0;
  return sumOverRanks(world_, counts ? localValue : 0.0) / mesh_.dp();
}

bool PipelineParallel::anyRankStops(bool mine) {
  return sumOverRanks(world_, mine ? 1.0 : 0.0) > 0;  // every stage and replica
}

void PipelineParallel::finish(nn::Module&, optim::Optimizer&) {
  gatherToStageZero(opts_.gatherOptimizer);
  // Every stage's figures, for the reporter's final line.
  const int pp = mesh_.pp();
  const int inFlight =
      peakInFlight(stageOps(opts_.schedule, mesh_.coord().stage, pp, opts_.microBatches, opts_.virtualStages));
  std::vector<double> mine{measuredSteps_ ? idleUs_ / std::max(1.0, busyUs_) : 0.0,
                           static_cast<double>(inFlight), static_cast<double>(peakActivationBytes_),
                           static_cast<double>(parameterBytes_)};
  const size_t k = mine.size();
  const std::vector<double> all = allgatherDoubles(mesh_.pipeline(), mine);
  perStage_.assign(k, {});
  for (int s = 0; s < pp; ++s)
    for (size_t j = 0; j < k; ++j) perStage_[j].push_back(all[s * k + j]);
  if (dataParallel_) dataParallel_->finish(*model_, *optimizer_);
}

std::map<std::string, Tensor> PipelineParallel::checkpointState() {
  gatherToStageZero(true);
  return {};
}

std::map<std::string, double> PipelineParallel::stats() const {
  std::map<std::string, double> s;
  if (dataParallel_)
    for (auto& [k, v] : dataParallel_->stats()) s["dp_" + k] = v;
  s["pipeline_bubble"] = measuredSteps_ ? idleUs_ / std::max(1.0, busyUs_) : 0.0;
  return s;
}

nlohmann::json PipelineParallel::report() const {
  const double p = mesh_.pp(), m = opts_.microBatches, v = opts_.virtualStages;
  nlohmann::json j{{"pipeline_stages", mesh_.pp()},
                   {"pipeline_replicas", mesh_.dp()},
                   {"micro_batches", opts_.microBatches},
                   {"pipeline_schedule", scheduleName(opts_.schedule)},
                   {"virtual_stages", opts_.virtualStages},
                   {"pipeline_cuts", cuts_},
                   {"pipeline_bubble_ideal", (p - 1) / (v * m + p - 1)}};
  const char* names[] = {"pipeline_bubble_per_stage", "pipeline_peak_in_flight_per_stage",
                         "pipeline_activation_bytes_peak_per_stage",
                         "pipeline_parameter_bytes_per_stage"};
  for (size_t k = 0; k < perStage_.size(); ++k) j[names[k]] = perStage_[k];
  return j;
}

std::vector<memory::RankMemory> PipelineParallel::gatherMemory(const memory::RankMemory& mine) {
  return allgatherMemory(world_, mine);  // after finish(): no step's messages are in flight
}

}  // namespace dtrain::parallel::pipeline
