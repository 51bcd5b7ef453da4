#include "parallel/pipeline/PipelineParallel.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/Error.h"
#include "core/Log.h"
#include "core/Timer.h"

namespace dtrain::parallel::pipeline {

using autograd::Variable;

namespace {

constexpr int kTiedTag = 1 << 20;
constexpr int kGatherTag = kTiedTag + 1;
constexpr int kMaxDims = 6;

// Tags of a step's messages: forward activation and backward gradient of
// micro-batch m, alternating between two ranges by step parity so that a fast
// stage's next step never matches this step's receives.
int activationTag(int64_t step, int m, int count) { return static_cast<int>(step % 2) * 2 * count + m; }
int gradientTag(int64_t step, int m, int count) { return activationTag(step, m, count) + count; }

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

// Every rank's doubles, in rank order (there is no f64 reduction: gathering
// the bytes keeps the sum exact and the same on every rank).
std::vector<double> allgatherDoubles(comm::Communicator& comm, const std::vector<double>& mine) {
  std::vector<double> all(mine.size() * comm.size());
  comm.allgather(mine.data(), all.data(), mine.size() * sizeof(double), DType::U8);
  return all;
}

double sumOverRanks(comm::Communicator& comm, double value) {
  double sum = 0;
  for (double v : allgatherDoubles(comm, {value})) sum += v;
  return sum;
}

}  // namespace

PipelineParallel::PipelineParallel(comm::Communicator& world, PipelineOptions options)
    : world_(world), opts_(std::move(options)), mesh_(world, opts_.stages, opts_.spread) {
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
  cuts_ = cutsFromSplit(opts_.split, static_cast<int>(layers_.size()), mesh_.pp());
}

void PipelineParallel::beginStep(int64_t step) {
  step_ = step;
  if (dataParallel_ && !cuts_.empty() && !outputShapes_.empty()) dataParallel_->beginStep(step);
}

void PipelineParallel::plan(const Tensor& microBatch) {
  const int n = static_cast<int>(layers_.size()), pp = mesh_.pp();
  // Rank 0 measures; everyone receives the cuts, output shapes and activation
  // bytes: [cuts (pp)] then per layer [bytes, ndim, dims (kMaxDims)].
  const size_t perLayer = 2 + kMaxDims;
  std::vector<int64_t> msg(pp + n * perLayer, 0);
  if (world_.rank() == 0) {
    std::vector<LayerProfile> profile = profileLayers(layers_, microBatch);
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
    planText_ = describePlan(layers_, profile, cuts, byHand);
    log::info(planText_, "\n  mesh: ", mesh_.describe(0), ", schedule ",
              scheduleName(opts_.schedule), ", ", opts_.microBatches, " micro-batches");
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
  for (int i = cuts_[stage]; i < stageEnd(cuts_, stage, n); ++i) {
    stageActivationBytes_ += activationBytes_[i];
    for (auto& [name, module] : layers_[i].modules) stageModules_.add(name, module);
  }
  // The profile's backward gave rank 0 gradients of every layer: the
  // optimizer updates every parameter whose gradient is defined, so only this
  // stage's may have one.
  std::set<std::string> mine;
  for (auto& [name, p] : stageModules_.namedParameters()) mine.insert(name);
  // Stages after the first never touch other stages' parameters again (stage 0
  // keeps them: it evaluates and saves the whole model), so they free them.
  for (size_t i = 0; i < optimizer_->size(); ++i) {
    if (mine.count(optimizer_->paramName(i))) {
      stageParams_.push_back(i);
      parameterBytes_ += optimizer_->param(i).data().numel() * static_cast<int64_t>(sizeof(float));
      continue;
    }
    optimizer_->param(i).grad() = Tensor();
    if (stage > 0) optimizer_->param(i).data() = Tensor::empty({0}, DType::F32);
  }
  // Parameters this stage shares with another (tied weights).
  if (stage == 0 || stage == lastStage()) {
    const std::vector<size_t> mine = ownedBy(stage);
    const std::set<size_t> owned(mine.begin(), mine.end());
    std::set<std::string> names;
    for (auto& [name, p] : stageModules_.namedParameters()) names.insert(name);
    const auto& params = optimizer_->params();
    if (stage == lastStage() && stage != 0) {
      // Mine but owned by stage 0: used by both.
      for (size_t i = 0; i < params.size(); ++i)
        if (names.count(params[i].first) && !owned.count(i)) tied_.push_back(i);
    } else if (stage == 0 && lastStage() != 0) {
      const std::vector<size_t> last = ownedBy(lastStage());
      nn::ModuleGroup lastModules;
      for (int i = cuts_[lastStage()]; i < n; ++i)
        for (auto& [name, module] : layers_[i].modules) lastModules.add(name, module);
      std::set<std::string> lastNames;
      for (auto& [name, p] : lastModules.namedParameters()) lastNames.insert(name);
      for (size_t i : mine)
        if (lastNames.count(params[i].first)) tied_.push_back(i);
    }
  }
  if (dataParallel_) {
    dataParallel_->setup(stageModules_, *optimizer_);
    dataParallel_->setSpanRecorder(spans_);
    dataParallel_->beginStep(step_);
  }
}

std::vector<size_t> PipelineParallel::ownedBy(int stage) const {
  const int n = static_cast<int>(layers_.size());
  std::set<std::string> earlier, here;
  auto names = [&](int from, int to, std::set<std::string>& out) {
    nn::ModuleGroup g;
    for (int i = from; i < to; ++i)
      for (auto& [name, module] : layers_[i].modules) g.add(name, module);
    for (auto& [name, p] : g.namedParameters()) out.insert(name);
  };
  names(0, cuts_[stage], earlier);
  names(cuts_[stage], stageEnd(cuts_, stage, n), here);
  std::vector<size_t> out;
  const auto& params = optimizer_->params();
  for (size_t i = 0; i < params.size(); ++i)
    if (here.count(params[i].first) && !earlier.count(params[i].first)) out.push_back(i);
  return out;
}

double PipelineParallel::forwardBackward(nn::Module& model, const StepWork& w) {
  const int m = opts_.microBatches;
  const int64_t rows = w.x.size(0);
  DTRAIN_CHECK(rows % m == 0, "pipeline: a batch of ", rows, " samples does not cut into ", m,
               " micro-batches");
  const int64_t mb = rows / m;
  auto micro = [&](const Tensor& t, int i) { return t.slice(0, i * mb, (i + 1) * mb).contiguous(); };
  if (outputShapes_.empty()) plan(micro(w.x, 0));

  const int stage = mesh_.coord().stage, last = lastStage();
  const int n = static_cast<int>(layers_.size());
  const int begin = cuts_[stage], end = stageEnd(cuts_, stage, n);
  comm::Communicator& pipe = mesh_.pipeline();
  Timer stepTimer;
  double idleUs = 0;

  // Every receive of the step, posted now (the shapes are the plan's).
  std::vector<Tensor> inputs(m), outputGrads(m);
  std::vector<comm::WorkPtr> inputReady(m), gradReady(m);
  for (int i = 0; i < m; ++i) {
    if (stage > 0) {
      inputs[i] = Tensor::empty(outputShapes_[begin - 1], DType::F32);
      inputReady[i] = pipe.irecv(inputs[i].data<float>(), inputs[i].numel(), DType::F32, stage - 1,
                                 activationTag(step_, i, m));
    }
    if (stage < last) {
      outputGrads[i] = Tensor::empty(outputShapes_[end - 1], DType::F32);
      gradReady[i] = pipe.irecv(outputGrads[i].data<float>(), outputGrads[i].numel(), DType::F32,
                                stage + 1, gradientTag(step_, i, m));
    }
  }
  auto wait = [&](comm::WorkPtr& work, const char* what, int i) {
    OpSpan s(w.spans, what, i);
    const double t0 = nowMicros();
    work->wait();
    idleUs += nowMicros() - t0;
  };
  std::vector<std::pair<comm::WorkPtr, Tensor>> sends;  // kept alive until sent
  std::vector<Variable> stageInputs(m), stageOutputs(m);
  double lossSum = 0;
  bool finite = true;
  int inFlight = 0;
  const Tensor seed = Tensor::full({1}, 1.0f / static_cast<float>(m));

  for (const PipeOp& op : stageOps(opts_.schedule, stage, mesh_.pp(), m)) {
    const int i = op.micro;
    if (op.forward) {
      Variable in;
      if (stage == 0) {
        in = Variable(micro(w.x, i));
      } else {
        wait(inputReady[i], "wait activation ", i);
        in = Variable(inputs[i], true);
      }
      OpSpan s(w.spans, "F", i);
      Variable h = in;
      for (int l = begin; l < end; ++l) h = layers_[l].forward(h);
      if (stage == last) {
        h = w.lossFromOutput(h, micro(w.y, i));
        const float l = h.item();
        finite = finite && std::isfinite(l);
        lossSum += l;
      } else {
        Tensor out = h.data().contiguous();
        sends.emplace_back(pipe.isend(out.data<float>(), out.numel(), DType::F32, stage + 1,
                                      activationTag(step_, i, m)),
                           out);
      }
      stageInputs[i] = in;
      stageOutputs[i] = h;
      peakInFlight_ = std::max(peakInFlight_, ++inFlight);
    } else {
      if (stage < last) wait(gradReady[i], "wait gradient ", i);
      if (dataParallel_) dataParallel_->beginMicroStep(i, m);
      OpSpan s(w.spans, "B", i);
      if (finite) {
        if (stage == last) stageOutputs[i].backward(seed.reshape(stageOutputs[i].shape()));
        else stageOutputs[i].backward(outputGrads[i]);
      }
      if (stage > 0) {
        Tensor g = stageInputs[i].grad().defined() ? stageInputs[i].grad().contiguous()
                                                   : Tensor::zeros(inputs[i].shape(), DType::F32);
        sends.emplace_back(pipe.isend(g.data<float>(), g.numel(), DType::F32, stage - 1,
                                      gradientTag(step_, i, m)),
                           g);
      }
      stageInputs[i] = Variable();
      stageOutputs[i] = Variable();  // frees the micro-batch's graph
      --inFlight;
    }
  }
  for (auto& [work, t] : sends) work->wait();
  if (step_ > 0 || measuredSteps_ == 0) {  // the first step's plan is not pipeline time
    if (measuredSteps_ == 0 && step_ > 0) idleUs_ = busyUs_ = 0;
    ++measuredSteps_;
    idleUs_ += idleUs;
    busyUs_ += stepTimer.seconds() * 1e6;
  }
  if (stage != last) return 0;
  return finite ? lossSum / m : std::nan("");
}

void PipelineParallel::exchangeTiedGradients() {
  if (tied_.empty()) return;
  const int stage = mesh_.coord().stage;
  const int peer = stage == 0 ? lastStage() : 0;
  comm::Communicator& pipe = mesh_.pipeline();
  for (size_t i : tied_) {
    Tensor& g = optimizer_->param(i).grad();
    DTRAIN_CHECK(g.defined(), "pipeline: tied parameter ", optimizer_->paramName(i), " has no gradient");
    Tensor mine = g.contiguous().clone(), theirs = Tensor::empty(g.shape(), DType::F32);
    auto sent = pipe.isend(mine.data<float>(), mine.numel(), DType::F32, peer, kTiedTag);
    pipe.recv(theirs.data<float>(), theirs.numel(), DType::F32, peer, kTiedTag);
    sent->wait();
    // Stage 0 adds (embedding + head), the last stage (head + embedding): the
    // same two floats, so the same sum on both.
    float* out = g.data<float>();
    const float* a = stage == 0 ? mine.data<float>() : theirs.data<float>();
    const float* b = stage == 0 ? theirs.data<float>() : mine.data<float>();
    for (int64_t k = 0, n = g.numel(); k < n; ++k) out[k] = a[k] + b[k];
  }
}

void PipelineParallel::finishGradients() {
  if (dataParallel_) dataParallel_->finishGradients();
  exchangeTiedGradients();
}

void PipelineParallel::zeroGradients(nn::Module&) {
  // Only this stage's: zeroing the others would give them gradients (Module::zeroGrad
  // allocates zeros for undefined ones), which the optimizer would then apply.
  stageModules_.zeroGrad();
}

void PipelineParallel::applyUpdate(optim::Optimizer& optimizer) {
  optimizer.step(stageParams_);
  // The reporter evaluates after this step: it needs every stage's parameters.
  if (opts_.gatherEvery > 0 && (step_ + 1) % opts_.gatherEvery == 0) gatherToStageZero(false);
}

double PipelineParallel::gradNormSquared(nn::Module&) {
  // Each parameter once (its owner's), summed over the stages.
  double sum = 0;
  for (size_t i : ownedBy(mesh_.coord().stage)) {
    const Tensor& g = optimizer_->param(i).grad();
    if (!g.defined()) continue;
    const Tensor c = g.contiguous();
    const float* x = c.data<float>();
    for (int64_t k = 0, n = c.numel(); k < n; ++k) sum += static_cast<double>(x[k]) * x[k];
  }
  return sumOverRanks(mesh_.pipeline(), sum);
}

double PipelineParallel::reduceMetric(double localValue) {
  // Only the last stages compute losses: their mean over the replicas.
  return sumOverRanks(world_, mesh_.coord().stage == lastStage() ? localValue : 0.0) / mesh_.dp();
}

void PipelineParallel::gatherToStageZero(bool withOptimizer) {
  if (cuts_.empty() || outputShapes_.empty()) return;  // no step ran: nothing changed
  comm::Communicator& pipe = mesh_.pipeline();
  const int stage = mesh_.coord().stage;
  for (int s = 1; s < mesh_.pp(); ++s) {
    if (stage != 0 && stage != s) continue;
    const std::vector<size_t> owned = ownedBy(s);
    if (withOptimizer) optimizer_->ensureState(owned);
    std::vector<Tensor*> tensors;
    auto state = withOptimizer ? optimizer_->namedState() : decltype(optimizer_->namedState()){};
    for (size_t i : owned) {
      tensors.push_back(&optimizer_->param(i).data());
      const std::string prefix = optimizer_->paramName(i) + ".";
      for (auto& [name, t] : state)
        if (name.compare(0, prefix.size(), prefix) == 0 &&
            name.find('.', prefix.size()) == std::string::npos)
          tensors.push_back(t);
    }
    for (Tensor* t : tensors) {
      if (stage == s) pipe.send(*t, 0, kGatherTag);
      else pipe.recv(*t, s, kGatherTag);
    }
  }
}

void PipelineParallel::finish(nn::Module&, optim::Optimizer&) {
  gatherToStageZero(opts_.gatherOptimizer);
  // Every stage's figures, for the reporter's final line.
  const int pp = mesh_.pp();
  std::vector<double> mine{measuredSteps_ ? idleUs_ / std::max(1.0, busyUs_) : 0.0,
                           static_cast<double>(peakInFlight_),
                           static_cast<double>(peakInFlight_) * static_cast<double>(stageActivationBytes_),
                           static_cast<double>(parameterBytes_)};
  const size_t k = mine.size();
  const std::vector<double> all = allgatherDoubles(mesh_.pipeline(), mine);
  perStage_.assign(k, {});
  for (int s = 0; s < pp; ++s)
    for (size_t j = 0; j < k; ++j) perStage_[j].push_back(all[s * k + j]);
  if (dataParallel_) dataParallel_->finish(*model_, *optimizer_);
}

std::map<std::string, double> PipelineParallel::stats() const {
  std::map<std::string, double> s;
  if (dataParallel_)
    for (auto& [k, v] : dataParallel_->stats()) s["dp_" + k] = v;
  s["pipeline_bubble"] = measuredSteps_ ? idleUs_ / std::max(1.0, busyUs_) : 0.0;
  return s;
}

nlohmann::json PipelineParallel::report() const {
  const double p = mesh_.pp(), m = opts_.microBatches;
  nlohmann::json j{{"pipeline_stages", mesh_.pp()},
                   {"pipeline_replicas", mesh_.dp()},
                   {"micro_batches", opts_.microBatches},
                   {"pipeline_schedule", scheduleName(opts_.schedule)},
                   {"pipeline_cuts", cuts_},
                   {"pipeline_bubble_ideal", (p - 1) / (m + p - 1)}};
  const char* names[] = {"pipeline_bubble_per_stage", "pipeline_peak_in_flight_per_stage",
                         "pipeline_activation_bytes_peak_per_stage",
                         "pipeline_parameter_bytes_per_stage"};
  for (size_t k = 0; k < perStage_.size(); ++k) j[names[k]] = perStage_[k];
  return j;
}

}  // namespace dtrain::parallel::pipeline
