#include "parallel/allreduce/DataParallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/Error.h"
#include "core/Timer.h"
#include "parallel/MemoryGather.h"

namespace dtrain::parallel {

namespace {
// Tags name the calls in the communication layer's error messages; buckets use
// their index, the rest are far above any bucket count.
constexpr int kMetricTag = 1 << 20;
constexpr int kSetupTag = (1 << 20) + 1;
constexpr int kStateTag = (1 << 20) + 2;

std::string shapeText(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}
}  // namespace

DataParallel::DataParallel(comm::Communicator& comm, DataParallelOptions options)
    : comm_(comm), opts_(options) {
  DTRAIN_CHECK_USAGE(std::isfinite(opts_.fusionMb) && opts_.fusionMb > 0,
                     "--fusion-mb must be a positive number (got ", opts_.fusionMb, ")");
  compress::validate(opts_.compress);
}

DataParallel::~DataParallel() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    workCv_.notify_all();
    thread_.join();
  }
  // The hooks point at this object; the parameters may outlive it.
  for (auto& b : buckets_)
    for (auto& p : b.params) p.clearHooks();
}

bool DataParallel::ownsProcess() const { return std::string(comm_.backend()) != "local"; }

bool broadcastReplicaState(comm::Communicator& comm, nn::Module& model,
                           optim::Optimizer& optimizer) {
  comm::Options o;
  o.root = 0;
  o.tag = kSetupTag;
  // Replicas start from rank 0's state whatever their seeds (and whatever a
  // rank's --load said): parameters, buffers, and optimizer state.
  for (auto& [name, p] : model.namedParameters()) comm.broadcast(p.data(), o);
  for (auto& [name, t] : model.namedBuffers()) comm.broadcast(*t, o);
  // The state of `model`'s trained parameters only: a pipeline stage's
  // replicas hold the other stages' parameters empty (or, on the reporter, whole).
  std::vector<size_t> mine;
  for (auto& [name, p] : model.namedParameters())
    if (auto i = optimizer.indexOf(name)) mine.push_back(*i);
  int32_t hasState = !mine.empty() && optimizer.hasState(mine.front()) ? 1 : 0;
  comm.broadcast(&hasState, 1, DType::I32, o);
  if (hasState) {
    optimizer.ensureState(mine);
    for (auto& [name, t] : optimizer.namedState(mine)) comm.broadcast(*t, o);
  }
  int64_t stepCount = optimizer.stepCount();
  comm.broadcast(&stepCount, 1, DType::I64, o);
  optimizer.setStepCount(stepCount);
  return hasState != 0;
}

double meanOverRanks(comm::Communicator& comm, double localValue) {
  float v = static_cast<float>(localValue);
  comm::Options o;
  o.tag = kMetricTag;
  comm.allreduce(&v, &v, 1, DType::F32, o);
  return static_cast<double>(v) / comm.size();
}

void DataParallel::setup(nn::Module& model, optim::Optimizer& optimizer) {
  DTRAIN_CHECK(buckets_.empty(), "DataParallel::setup called twice");
  broadcastReplicaState(comm_, model, optimizer);
  if (opts_.syncBn) {
    bnComm_ = comm_.split(0, comm_.rank());  // collective: every replica runs setup
    std::vector<nn::Module*> todo{&model};
    while (!todo.empty()) {
      nn::Module* m = todo.back();
      todo.pop_back();
      if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(m))
        bn->sync = [comm = bnComm_](float* data, int64_t n) {
          comm->allreduce(data, data, static_cast<size_t>(n), DType::F32);
        };
      for (auto& [name, child] : m->children()) todo.push_back(child.get());
    }
  }
  const size_t bytes = static_cast<size_t>(std::max(1.0, opts_.fusionMb * 1024 * 1024));
  if (opts_.sfb != SfbMode::Off) {
    DTRAIN_CHECK_USAGE(opts_.sfb == SfbMode::On || opts_.sfbRows > 0,
                       "--sfb auto needs the rows per step (DataParallelOptions::sfbRows)");
    for (auto& [name, layer] : trainedLinearLayers(model)) {
      const int64_t out = layer->weight.shape()[0], in = layer->weight.shape()[1];
      if (opts_.sfb == SfbMode::On || sfbPays(opts_.sfbRows, in, out, comm_.size()))
        factors_.push_back(std::make_unique<SufficientFactors>(name, layer));
    }
  }
  auto factorsOf = [this](const autograd::Variable& p) {
    for (size_t f = 0; f < factors_.size(); ++f)
      if (factors_[f]->weight().impl() == p.impl()) return static_cast<int>(f);
    return -1;
  };
  // A factor-exchanged weight is a bucket of its own.
  buckets_ = makeFusionBuckets(model.parameters(), bytes, 1,
                               [&](const autograd::Variable& p) { return factorsOf(p) >= 0; });
  for (size_t i = 0; i < buckets_.size(); ++i) {
    gradBytes_ += static_cast<int64_t>(buckets_[i].bytes());
    const int f = buckets_[i].params.size() == 1 ? factorsOf(buckets_[i].params[0]) : -1;
    bucketFactors_.push_back(f);
    if (f >= 0) {
      compressors_.push_back(std::make_unique<SfbReducer>(*factors_[f]));
      continue;
    }
    compress::BucketLayout layout;
    layout.index = static_cast<int>(i);
    for (auto& p : buckets_[i].params) layout.shapes.push_back(p.shape());
    compress::CompressOptions o = opts_.compress;
    o.commRank = comm_.rank();
    o.commSize = comm_.size();
    compressors_.push_back(compress::makeCompressor(o, layout));
  }
  ready_.assign(buckets_.size(), 0);
  startUs_.assign(buckets_.size(), 0);
  endUs_.assign(buckets_.size(), 0);
  if (opts_.overlap) {
    for (size_t i = 0; i < buckets_.size(); ++i)
      for (auto& p : buckets_[i].params)
        p.addGradReadyHook([this, i](autograd::Variable&) { onGradReady(i); });
  }
  // The communication thread's buffers count in this rank's memory.
  thread_ = std::thread([this, domain = memory::currentDomain()] {
    memory::DomainScope accounted(domain);
    commLoop();
  });
}

void DataParallel::beginStep(int64_t step) {
  traffic_.beginStep(comm_);
  step_ = step;
  std::fill(ready_.begin(), ready_.end(), 0);
  nextLaunch_ = 0;
  for (auto& f : factors_) f->clear();
}

void DataParallel::beginMicroStep(int index, int count) { syncing_ = index == count - 1; }

void DataParallel::onGradReady(size_t bucket) {
  if (!syncing_) return;  // accumulation micro-step: gradients stay local
  if (++ready_[bucket] == buckets_[bucket].params.size()) launchInOrder(false);
}

// Launches complete buckets (or, with all, every remaining one) strictly in
// bucket order: the ranks' collectives must be issued in the same order.
void DataParallel::launchInOrder(bool all) {
  size_t first = nextLaunch_;
  while (nextLaunch_ < buckets_.size() &&
         (all || ready_[nextLaunch_] == buckets_[nextLaunch_].params.size())) {
    if (all) {
      // A parameter whose hook did not fire (no overlap, or unused in this
      // forward) may still hold a stale gradient: grad() materializes the zeros.
      for (auto& p : buckets_[nextLaunch_].params) p.grad();
    }
    ++nextLaunch_;
  }
  if (nextLaunch_ == first) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = first; i < nextLaunch_; ++i) queue_.push_back(i);
  }
  workCv_.notify_one();
}

void DataParallel::commLoop() {
  for (;;) {
    size_t i;
    {
      std::unique_lock<std::mutex> lock(mu_);
      workCv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      i = queue_.front();
      queue_.pop_front();
    }
    std::exception_ptr err;
    const double t0 = nowMicros();
    try {
      runBucket(i);
    } catch (...) {
      err = std::current_exception();
    }
    const double t1 = nowMicros();
    if (spans_) {
      const std::string what =
          bucketFactors_[i] >= 0
              ? "sfb " + factors_[bucketFactors_[i]]->weightName() + ":"
              : opts_.compress.name == "none" ? std::string("allreduce") : opts_.compress.name;
      spans_->span(what + " bucket " + std::to_string(i) + " (" +
                       std::to_string(buckets_[i].bytes() / 1024) + " KiB)",
                   "comm", Lane::Comm, t0, t1);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      startUs_[i] = t0;
      endUs_[i] = t1;
      ++completed_;
      if (err && !error_) error_ = err;
    }
    doneCv_.notify_all();
  }
}

void DataParallel::runBucket(size_t i) {
  compress::ReduceContext ctx;
  ctx.tag = static_cast<int>(i);
  ctx.algo = opts_.algo;
  ctx.step = step_;
  compress::Compressor& c = *compressors_[i];
  c.reduce(buckets_[i].buffer.data<float>(), comm_, ctx);
  payloadBytes_ += static_cast<double>(c.traffic().payload);
}

std::vector<std::pair<std::string, Tensor*>> DataParallel::compressorState() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < compressors_.size(); ++i)
    for (auto& [name, t] : compressors_[i]->state())
      out.emplace_back("compress.bucket" + std::to_string(i) + "." + name, t);
  return out;
}

void DataParallel::finishGradients() {
  const double backwardEnd = nowMicros();
  launchInOrder(true);
  {
    std::unique_lock<std::mutex> lock(mu_);
    doneCv_.wait(lock, [&] { return completed_ == buckets_.size() || error_; });
    if (error_) {
      // Leave the communication thread idle-able: drop what was not started.
      queue_.clear();
      std::rethrow_exception(error_);
    }
    completed_ = 0;
  }
  const double done = nowMicros();
  if (spans_ && done - backwardEnd > 1)
    spans_->span("wait allreduce", "comm", Lane::Compute, backwardEnd, done);
  traffic_.endStep(comm_);  // every bucket of this step has completed
  traffic_.computedUntil(backwardEnd);
  traffic_.exposed(done - backwardEnd);
  for (size_t i = 0; i < buckets_.size(); ++i)
    traffic_.communicated(endUs_[i] - startUs_[i],
                          std::max(0.0, std::min(endUs_[i], backwardEnd) - startUs_[i]));
}

std::map<std::string, Tensor> DataParallel::checkpointState() {
  // Called between steps (the communication thread is idle). Every rank's state
  // has the same names and shapes (same buckets, same compressor): one flat
  // allgather of them all.
  auto mine = compressorState();
  if (mine.empty()) return {};
  std::vector<float> flat;
  for (auto& [name, t] : mine) {
    const Tensor c = t->contiguous();
    flat.insert(flat.end(), c.data<float>(), c.data<float>() + c.numel());
  }
  std::vector<float> all(flat.size() * static_cast<size_t>(comm_.size()));
  comm::Options o;
  o.tag = kStateTag;
  comm_.allgather(flat.data(), all.data(), flat.size(), DType::F32, o);
  std::map<std::string, Tensor> out;
  if (!isReporter()) return out;
  for (int r = 0; r < comm_.size(); ++r) {
    const float* src = all.data() + flat.size() * static_cast<size_t>(r);
    for (auto& [name, t] : mine) {
      Tensor copy = Tensor::empty(t->shape());
      std::copy(src, src + copy.numel(), copy.data<float>());
      src += copy.numel();
      out.emplace("rank" + std::to_string(r) + "." + name, std::move(copy));
    }
  }
  return out;
}

void DataParallel::loadCheckpointState(const std::map<std::string, Tensor>& saved) {
  // A checkpoint without this state (saved uncompressed, or by another
  // strategy) starts the residuals at zero, as a fresh run does.
  const std::string prefix = "rank" + std::to_string(comm_.rank()) + ".";
  for (auto& [name, t] : compressorState()) {
    auto it = saved.find(prefix + name);
    if (it == saved.end()) continue;
    DTRAIN_CHECK(it->second.shape() == t->shape() && it->second.dtype() == t->dtype(),
                 "checkpoint: compression state ", it->first, " has shape ",
                 shapeText(it->second.shape()), ", this run's is ", shapeText(t->shape()),
                 " (resume with the --compress, --fusion-mb and --workers it was saved with)");
    t->copyFrom(it->second);
  }
}

std::vector<memory::RankMemory> DataParallel::gatherMemory(const memory::RankMemory& mine) {
  return allgatherMemory(comm_, mine);  // between steps: the communication thread is idle
}

double DataParallel::reduceMetric(double localValue) {
  // Called between steps: the communication thread is idle, so this thread may
  // issue calls on the communicator.
  return meanOverRanks(comm_, localValue);
}

std::vector<std::string> DataParallel::sfbLayers() const {
  std::vector<std::string> names;
  for (const auto& f : factors_) names.push_back(f->weightName());
  return names;
}

nlohmann::json DataParallel::report() const {
  nlohmann::json out = nlohmann::json::object();
  if (opts_.sfb != SfbMode::Off) out["sfb_layers"] = sfbLayers();
  return out;
}

bool DataParallel::anyRankStops(bool mine) {
  return meanOverRanks(comm_, mine ? 1.0 : 0.0) > 0;  // between steps, as reduceMetric
}

std::map<std::string, double> DataParallel::stats() const {
  const double n = static_cast<double>(std::max<int64_t>(1, traffic_.steps()));
  const double payload = traffic_.steps() ? payloadBytes_ / n : static_cast<double>(gradBytes_);
  std::map<std::string, double> out{
      {"bytes_sent_total", static_cast<double>(comm_.bytesSent())},
      {"compressed_bytes_per_step", payload},
      {"compression_ratio", payload > 0 ? static_cast<double>(gradBytes_) / payload : 1.0},
      {"allreduce_bytes", static_cast<double>(gradBytes_)},
      {"buckets", static_cast<double>(buckets_.size())},
      {"fusion_mb", opts_.fusionMb}};
  // Measured on this rank (rank 0 prints); a bandwidth-optimal allreduce sends
  // 2 (N-1)/N of allreduce_bytes per step, tree and rhd more.
  traffic_.report(out);
  return out;
}

}  // namespace dtrain::parallel
