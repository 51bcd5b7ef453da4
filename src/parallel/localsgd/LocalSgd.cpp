#include "parallel/localsgd/LocalSgd.h"

#include <algorithm>
#include <cstring>

#include "core/Error.h"
#include "core/Log.h"
#include "core/Timer.h"
#include "parallel/MemoryGather.h"
#include "parallel/RankState.h"

namespace dtrain::parallel::localsgd {

namespace {
// Far above DataParallel's bucket and set-up tags (the warm-up's, on the same
// communicator): chunk i of the delta uses kDeltaTag + i.
constexpr int kDeltaTag = 1 << 22;
constexpr int kBufferTag = (1 << 23) + 1;
constexpr int kRankStateTag = (1 << 23) + 2;
constexpr int kAverageTag = (1 << 23) + 3;
constexpr int kLocalSgdMetricTag = (1 << 23) + 4;

const std::string kAnchor = "outer.anchor.", kMomentum = "outer.momentum.",
                  kAverage = "outer.average.", kPending = "outer.pending";

bool hasPrefix(const std::map<std::string, Tensor>& m, const std::string& prefix) {
  auto it = m.lower_bound(prefix);
  return it != m.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

const Tensor* findTensor(const std::map<std::string, Tensor>& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

void copyChecked(Tensor& dst, const Tensor& src, const std::string& name) {
  DTRAIN_CHECK(src.numel() == dst.numel() && src.dtype() == dst.dtype(), "checkpoint: local-sgd state ",
               name, " does not match this run's (resume with the model and --optimizer it was saved with)");
  dst.copyFrom(src.shape() == dst.shape() ? src : src.contiguous().reshape(dst.shape()));
}
}  // namespace

LocalSgd::LocalSgd(comm::Communicator& comm, LocalSgdOptions options)
    : comm_(comm), opts_(std::move(options)), outer_(opts_.outer) {
  DTRAIN_CHECK_USAGE(opts_.syncEvery >= 1, "--sync-every must be >= 1 (got ", opts_.syncEvery, ")");
  DTRAIN_CHECK_USAGE(opts_.startStep >= 0, "--local-sgd-start-step must be >= 0 (got ", opts_.startStep, ")");
  compress::validate(opts_.compress);
}

LocalSgd::~LocalSgd() = default;

void LocalSgd::setup(nn::Module& model, optim::Optimizer& optimizer) {
  DTRAIN_CHECK(params_.empty(), "LocalSgd::setup called twice");
  model_ = &model;
  optimizer_ = &optimizer;
  if (opts_.startStep > 0) {
    // The synchronous phase is the allreduce strategy itself (its hooks stay
    // quiet in local steps: beginMicroStep tells it no backward communicates).
    DataParallelOptions d;
    d.fusionMb = opts_.fusionMb;
    d.overlap = opts_.overlap;
    d.algo = opts_.algo;
    warmup_ = std::make_unique<DataParallel>(comm_, d);
    warmup_->setSpanRecorder(spans_);
    warmup_->setup(model, optimizer);  // replicas start from rank 0's state
  } else {
    broadcastReplicaState(comm_, model, optimizer);
  }
  for (auto& [name, p] : model.namedParameters()) {
    if (!p.requiresGrad()) continue;  // frozen (LoRA's base): never moves
    DTRAIN_CHECK(p.data().isContiguous() && p.data().dtype() == DType::F32,
                 "local-sgd: parameter ", name, " is not a contiguous f32 tensor");
    params_.emplace_back(name, p);
  }
  for (auto& [name, p] : params_) {
    anchor_.push_back(p.data().clone());
    if (outer_.hasMomentum()) momentum_.push_back(Tensor::zeros(p.shape()));
  }
  // Chunks of whole parameters of about --fusion-mb, in model order.
  const double limit = std::max(1.0, opts_.fusionMb * 1024 * 1024);
  for (size_t i = 0; i < params_.size();) {
    Chunk c;
    compress::BucketLayout layout;
    layout.index = static_cast<int>(chunks_.size());
    int64_t numel = 0;
    while (i < params_.size() && (c.params.empty() || static_cast<double>(numel) * 4 < limit)) {
      c.params.push_back(i);
      layout.shapes.push_back(params_[i].second.shape());
      numel += params_[i].second.data().numel();
      ++i;
    }
    c.delta = Tensor::zeros({numel});
    compress::CompressOptions o = opts_.compress;
    o.commRank = comm_.rank();
    o.commSize = comm_.size();
    c.compressor = compress::makeCompressor(o, layout);
    chunks_.push_back(std::move(c));
  }
}

void LocalSgd::captureAnchor() {
  for (size_t i = 0; i < params_.size(); ++i) anchor_[i].copyFrom(params_[i].second.data());
  pending_ = 0;
}

void LocalSgd::beginStep(int64_t step) {
  step_ = step;
  if (warmup_ && warmup(step)) warmup_->beginStep(step);
}

void LocalSgd::beginMicroStep(int index, int count) {
  if (!warmup_) return;
  if (warmup(step_))
    warmup_->beginMicroStep(index, count);
  else
    warmup_->beginMicroStep(0, 2);  // not the communicating micro-step: gradients stay local
}

void LocalSgd::finishGradients() {
  if (warmup_ && warmup(step_)) warmup_->finishGradients();
}

void LocalSgd::applyUpdate(optim::Optimizer& optimizer) {
  optimizer.step();
  ++steps_;
  if (warmup(step_)) {
    ++warmupSteps_;
    if (step_ + 1 == opts_.startStep) captureAnchor();  // local steps start from here
    return;
  }
  ++pending_;
  if ((step_ + 1 - opts_.startStep) % opts_.syncEvery == 0) synchronize();
}

void LocalSgd::synchronize() {
  const double t0 = nowMicros();
  for (size_t c = 0; c < chunks_.size(); ++c) {
    Chunk& chunk = chunks_[c];
    float* delta = chunk.delta.data<float>();
    // The outer gradient's share of this rank: anchor - params.
    int64_t at = 0;
    for (size_t i : chunk.params) {
      const float* a = anchor_[i].data<float>();
      const float* p = params_[i].second.data().data<float>();
      const int64_t n = anchor_[i].numel();
      for (int64_t k = 0; k < n; ++k) delta[at + k] = a[k] - p[k];
      at += n;
    }
    compress::ReduceContext ctx;
    ctx.tag = kDeltaTag + static_cast<int>(c);
    ctx.algo = opts_.algo;
    ctx.step = syncs_;
    chunk.compressor->reduce(delta, comm_, ctx);  // the mean over the workers
    payloadBytes_ += static_cast<double>(chunk.compressor->traffic().payload);
    at = 0;
    for (size_t i : chunk.params) {
      const int64_t n = anchor_[i].numel();
      outer_.step(anchor_[i].data<float>(), delta + at,
                  momentum_.empty() ? nullptr : momentum_[i].data<float>(), static_cast<size_t>(n));
      params_[i].second.data().copyFrom(anchor_[i]);
      at += n;
    }
  }
  // Float buffers (running statistics) are averaged as they are.
  comm::Options o;
  o.tag = kBufferTag;
  o.algo = opts_.algo;
  for (auto& [name, t] : model_->namedBuffers()) {
    if (t->dtype() != DType::F32 || !t->isContiguous()) continue;
    comm_.allreduce(*t, o);
    float* v = t->data<float>();
    for (int64_t k = 0; k < t->numel(); ++k) v[k] /= static_cast<float>(comm_.size());
  }
  pending_ = 0;
  ++syncs_;
  const double t1 = nowMicros();
  syncUs_ += t1 - t0;
  if (spans_) spans_->span("local-sgd sync " + std::to_string(syncs_), "comm", Lane::Comm, t0, t1);
}

void LocalSgd::finish(nn::Module&, optim::Optimizer&) {
  // A last, partial period: the final model is the workers' global one.
  if (pending_ > 0) synchronize();
}

NamedState LocalSgd::perRankState(bool withParams) {
  std::vector<std::pair<std::string, Tensor*>> out;
  if (withParams)
    for (auto& [name, p] : params_) out.emplace_back("local." + name, &p.data());
  for (auto& [name, t] : optimizer_->namedState()) out.emplace_back("inner." + name, t);
  for (size_t c = 0; c < chunks_.size(); ++c)
    for (auto& [name, t] : chunks_[c].compressor->state())
      out.emplace_back("compress.chunk" + std::to_string(c) + "." + name, t);
  return out;
}

std::map<std::string, Tensor> LocalSgd::checkpointState() {
  // Between steps, on every rank. Every rank's state has the same names,
  // dtypes and shapes: one allgather of their bytes.
  const bool between = pending_ > 0;  // the replicas differ
  std::map<std::string, Tensor> out = gatherRankState(comm_, perRankState(between), kRankStateTag);
  // The workers' mean parameters: where a resume with another number of workers starts.
  std::vector<Tensor> average;
  if (between) {
    comm::Options a;
    a.tag = kAverageTag;
    a.algo = opts_.algo;
    for (auto& [name, p] : params_) {
      Tensor t = p.data().clone();
      comm_.allreduce(t, a);
      float* v = t.data<float>();
      for (int64_t k = 0; k < t.numel(); ++k) v[k] /= static_cast<float>(comm_.size());
      average.push_back(std::move(t));
    }
  }
  if (!isReporter()) return out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace(kAnchor + params_[i].first, anchor_[i].clone());
    if (!momentum_.empty()) out.emplace(kMomentum + params_[i].first, momentum_[i].clone());
    if (between) out.emplace(kAverage + params_[i].first, average[i]);
  }
  Tensor pending = Tensor::empty({1}, DType::I64);
  *pending.data<int64_t>() = pending_;
  out.emplace(kPending, std::move(pending));
  return out;
}

void LocalSgd::loadCheckpointState(const std::map<std::string, Tensor>& saved) {
  if (!hasPrefix(saved, kAnchor)) return;  // saved by another strategy: start a period here
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    const Tensor* a = findTensor(saved, kAnchor + name);
    DTRAIN_CHECK(a != nullptr, "checkpoint: no local-sgd anchor for ", name);
    copyChecked(anchor_[i], *a, kAnchor + name);
    if (!momentum_.empty())
      if (const Tensor* m = findTensor(saved, kMomentum + name)) copyChecked(momentum_[i], *m, kMomentum + name);
  }
  if (const Tensor* p = findTensor(saved, kPending)) pending_ = *p->contiguous().data<int64_t>();
  const std::string prefix = "rank" + std::to_string(comm_.rank()) + ".";
  if (hasPrefix(saved, prefix)) {
    // The same workers: each takes back its own parameters and inner state.
    optimizer_->ensureState();
    for (auto& [name, t] : perRankState(true))
      if (const Tensor* s = findTensor(saved, prefix + name)) copyChecked(*t, *s, prefix + name);
    return;
  }
  if (hasPrefix(saved, kAverage)) {
    // Another number of workers, between syncs: every worker goes on from the
    // old workers' mean, with rank 0's inner optimizer state (the trainer's).
    for (size_t i = 0; i < params_.size(); ++i)
      if (const Tensor* m = findTensor(saved, kAverage + params_[i].first))
        copyChecked(params_[i].second.data(), *m, kAverage + params_[i].first);
    if (isReporter())
      log::info("local-sgd: resuming between syncs with another number of workers: every worker "
                "starts from the old workers' mean parameters (", pending_, " local steps into the period)");
  }
}

std::vector<memory::RankMemory> LocalSgd::gatherMemory(const memory::RankMemory& mine) {
  return allgatherMemory(comm_, mine);
}

double LocalSgd::reduceMetric(double localValue) {
  float v = static_cast<float>(localValue);
  comm::Options o;
  o.tag = kLocalSgdMetricTag;
  comm_.allreduce(&v, &v, 1, DType::F32, o);
  return static_cast<double>(v) / comm_.size();
}

std::map<std::string, double> LocalSgd::stats() const {
  const double steps = static_cast<double>(std::max<int64_t>(1, steps_));
  double commUs = syncUs_;
  if (warmup_ && warmupSteps_ > 0) {
    auto w = warmup_->stats();
    commUs += w["comm_ms"] * 1e3 * static_cast<double>(warmupSteps_);
  }
  const double sent = static_cast<double>(comm_.bytesSent());
  return {{"syncs", static_cast<double>(syncs_)},
          {"sync_every", static_cast<double>(opts_.syncEvery)},
          {"local_sgd_start_step", static_cast<double>(opts_.startStep)},
          {"sync_ms", syncs_ ? syncUs_ / 1e3 / static_cast<double>(syncs_) : 0.0},
          {"comm_ms", commUs / 1e3 / steps},
          {"comm_s_total", commUs / 1e6},
          {"bytes_sent_total", sent},
          {"bytes_sent_per_worker", sent / steps},
          {"compressed_bytes_per_sync", syncs_ ? payloadBytes_ / static_cast<double>(syncs_) : 0.0}};
}

}  // namespace dtrain::parallel::localsgd
