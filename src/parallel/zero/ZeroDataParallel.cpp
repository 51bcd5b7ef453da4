#include "parallel/zero/ZeroDataParallel.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/Error.h"
#include "core/Timer.h"
#include "optim/Factory.h"
#include "tensor/Half.h"
#include "parallel/MemoryGather.h"
#include "parallel/RankSums.h"
#include "parallel/allreduce/DataParallel.h"

namespace dtrain::parallel::zero {

namespace {
constexpr int kNormTag = (1 << 20) + 3;
constexpr int kTensorNormsTag = (1 << 20) + 4;  // LARS/LAMB: partial norms of the pieces
constexpr int kGatherTag = 1 << 19;       // + bucket: the parameter allgathers
constexpr int kStateTag = (1 << 19) + (1 << 18);

void waitAll(std::vector<comm::WorkPtr>& work) {
  for (auto& w : work)
    if (w) w->wait();
  for (auto& w : work) w.reset();
}
}  // namespace

void validate(const ZeroOptions& o) {
  DTRAIN_CHECK_USAGE(o.stage >= 1 && o.stage <= 3, "--zero ", o.stage,
                     ": the stages are 1 (optimizer state), 2 (and gradients) and 3 (and parameters)");
  DTRAIN_CHECK_USAGE(o.gradientWire == DType::F32 || o.stage <= 2,
                     "--zero 3 does not combine with --compress yet (stages 1 and 2 reduce-scatter "
                     "in fp16 or bf16)");
}

ZeroDataParallel::ZeroDataParallel(comm::Communicator& comm, ZeroOptions options)
    : comm_(comm), opts_(std::move(options)) {
  validate(opts_);
  DTRAIN_CHECK_USAGE(std::isfinite(opts_.fusionMb) && opts_.fusionMb > 0,
                     "--fusion-mb must be a positive number (got ", opts_.fusionMb, ")");
}

ZeroDataParallel::~ZeroDataParallel() {
  try {
    waitAll(work_);
    waitAll(gatherWork_);
  } catch (...) {  // a failed run is already being reported
  }
  for (auto& b : buckets_)
    for (auto& p : b.params) p.clearHooks();
  for (nn::Module* m : unitModules_)
    if (m) m->setForwardWrapper(nullptr);
}

void ZeroDataParallel::setup(nn::Module& model, optim::Optimizer& optimizer) {
  DTRAIN_CHECK(buckets_.empty(), "ZeroDataParallel::setup called twice");
  const bool hasState = broadcastReplicaState(comm_, model, optimizer);
  const int64_t stepCount = optimizer.stepCount();
  const size_t bytes = static_cast<size_t>(std::max(1.0, opts_.fusionMb * 1024 * 1024));
  std::unordered_set<const void*> isolated;
  for (const std::string& name : isolated_) {
    const auto index = optimizer.indexOf(name);
    DTRAIN_CHECK(index, "ZeRO: no parameter ", name, " to isolate");
    isolated.insert(optimizer.param(*index).impl());
  }
  buckets_ = opts_.stage == 3
                 ? makeUnitBuckets(model)
                 : makeFusionBuckets(model.parameters(), bytes, comm_.size(),
                                     [&](const autograd::Variable& p) { return isolated.count(p.impl()) > 0; });
  // Parameters move into padded flat buffers, one per bucket, laid out as the
  // bucket's gradients are.
  {
    memory::CategoryScope accounted(memory::Category::Parameters);
    for (auto& b : buckets_) {
      Tensor flat = Tensor::zeros({b.numel()});
      int64_t off = 0;
      for (auto& p : b.params) {
        Tensor view = flat.slice(0, off, off + p.numel()).view(p.shape());
        view.copyFrom(p.data());
        p.data() = view;
        off += p.numel();
      }
      if (opts_.stage == 3) {  // the owned slice, kept; the flat buffer comes and goes
        const int64_t s = flat.numel() / comm_.size();
        if (opts_.offloadParams && !paramFile_)
          paramFile_ = std::make_shared<memory::OffloadFile>(opts_.optimizerOptions.offloadDir);
        memory::OffloadScope offloaded(paramFile_.get());
        paramShard_.push_back(flat.slice(0, comm_.rank() * s, (comm_.rank() + 1) * s).clone());
      }
      paramFlat_.push_back(std::move(flat));
    }
  }
  buildShardOptimizer(optimizer);
  if (hasState) {
    // This rank's slices of the loaded state, then the full copy goes.
    shard_->ensureState();
    std::unordered_map<std::string, Tensor*> full, mine;
    for (auto& [name, t] : optimizer.namedState()) full[name] = t;
    for (auto& [name, t] : shard_->namedState()) mine[name] = t;
    std::vector<std::string> slots = shard_->slotNames();
    slots.insert(slots.begin(), "step");
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const Piece& piece = pieces_[i];
      for (const std::string& slot : slots) {
        const Tensor src = full.at(piece.name + "." + slot)->contiguous();
        Tensor& dst = *mine.at(shard_->paramName(i) + "." + slot);
        dst.copyFrom(slot == "step" ? src
                                    : src.view({src.numel()}).slice(0, piece.paramOffset,
                                                                    piece.paramOffset + piece.length));
      }
    }
    optimizer.resetState();
  }
  shard_->setStepCount(stepCount);
  ready_.assign(buckets_.size(), 0);
  work_.resize(buckets_.size());
  wireIn_.resize(buckets_.size());
  wireOut_.resize(buckets_.size());
  for (size_t i = 0; i < buckets_.size(); ++i)
    for (auto& p : buckets_[i].params)
      p.addGradReadyHook([this, i](autograd::Variable&) { onGradReady(i); });
  if (opts_.stage == 3) shardParameters();
}

void ZeroDataParallel::buildShardOptimizer(const optim::Optimizer& full) {
  std::unordered_map<const void*, std::string> names;
  for (const auto& [name, v] : full.params()) names[v.impl()] = name;
  const int64_t r = comm_.rank();
  optim::NamedParameters params;
  std::vector<int64_t> sourceDims;
  {
    memory::CategoryScope accounted(memory::Category::Gradients);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const int64_t s = shardSize(b), lo = r * s, hi = lo + s;
      gradShard_.push_back(opts_.stage >= 2 ? Tensor::zeros({s}) : Tensor());
      int64_t off = 0;
      bucketNames_.emplace_back();
      for (auto& p : buckets_[b].params) {
        bucketNames_.back().push_back(names.at(p.impl()));
        const int64_t a = std::max(lo, off), e = std::min(hi, off + p.numel());
        if (a < e) {
          Piece piece{b, p, names.at(p.impl()), a - off, a, e - a};
          // Stage 3 updates the persistent owned slice, the others the flat buffer.
          autograd::Variable v(opts_.stage == 3 ? paramShard_[b].slice(0, a - lo, e - lo)
                                                : paramFlat_[b].slice(0, a, e),
                               true);
          // Stage 1: the owned range of the bucket; stage 2: the owned slice.
          v.setGradBuffer(opts_.stage >= 2 ? gradShard_[b].slice(0, a - lo, e - lo)
                                           : buckets_[b].buffer.slice(0, a, e));
          params.emplace_back(piece.name + "@" + std::to_string(piece.paramOffset), v);
          sourceDims.push_back(static_cast<int64_t>(p.shape().size()));
          pieces_.push_back(std::move(piece));
        }
        off += p.numel();
      }
    }
  }
  shard_ = optim::makeOptimizer(opts_.optimizer, std::move(params), opts_.optimizerOptions);
  // Weight decay follows the full parameter's dimensions, not the 1-D piece's.
  shard_->setDecay2dOnly(opts_.optimizerOptions.decay2dOnly.value_or(false), sourceDims);
  if (shard_->usesTensorNorms()) {
    // LARS/LAMB: a tensor's trust ratio from the norms of all its pieces,
    // wherever they are: every rank adds the partial norms of every tensor
    // (zero where it owns none of it) in rank order, the same on every rank.
    std::unordered_map<std::string, int64_t> tensorIndex;
    for (const auto& [name, v] : full.params()) tensorIndex.emplace(name, static_cast<int64_t>(tensorIndex.size()));
    std::vector<int64_t> tensorOf;
    for (const Piece& piece : pieces_) tensorOf.push_back(tensorIndex.at(piece.name));
    shard_->setTensorGroups(std::move(tensorOf), static_cast<int64_t>(tensorIndex.size()),
                            [this](std::vector<double>& partials) {
                              sumOverRanks(comm_, partials, kTensorNormsTag);
                            });
  }
}

void ZeroDataParallel::allocateGradBucket(size_t index) {
  FusionBucket& b = buckets_[index];
  if (b.buffer.defined()) return;
  memory::CategoryScope accounted(memory::Category::Gradients);
  b.buffer = Tensor::zeros({static_cast<int64_t>(paramFlat_[index].numel())});
  int64_t off = 0;
  for (auto& p : b.params) {
    // Copies a gradient backward already produced outside the bucket.
    p.setGradBuffer(b.buffer.slice(0, off, off + p.numel()).view(p.shape()));
    off += p.numel();
  }
}

void ZeroDataParallel::allocateGradBuckets() {
  // Stage 2 keeps a full gradient only while backward fills its bucket: the
  // first two buckets now, the others as backward reaches them (onGradReady).
  const size_t n = opts_.stage == 2 ? std::min<size_t>(kBucketsAhead, buckets_.size()) : buckets_.size();
  for (size_t b = 0; b < n; ++b) allocateGradBucket(b);
}

void ZeroDataParallel::zeroGradients(nn::Module& model) {
  if (opts_.stage == 1) return model.zeroGrad();
  if (opts_.stage == 3) return;  // buckets are allocated zeroed, the slices at beginStep
  // Stage 2: only the allocated buckets; the others' gradients stay undefined
  // (zero to backward) until their buckets exist.
  for (auto& b : buckets_)
    if (b.buffer.defined())
      for (auto& p : b.params) p.zeroGrad();
}

void ZeroDataParallel::freeReducedBuckets() {
  for (size_t b = 0; b < nextLaunch_; ++b) {
    if (!buckets_[b].buffer.defined() || !work_[b] || !work_[b]->test()) continue;
    for (auto& p : buckets_[b].params) p.grad() = Tensor();
    buckets_[b].buffer = Tensor();
  }
}

void ZeroDataParallel::beginStep(int64_t step) {
  traffic_.beginStep(comm_);
  firstLaunchUs_ = 0;
  step_ = step;
  std::fill(ready_.begin(), ready_.end(), 0);
  nextLaunch_ = 0;
  if (opts_.stage == 3) {
    if (whole_) releaseWhole();  // gathered for evaluation or saving
    for (auto& g : gradShard_) g.zero();  // micro-steps add into it
    return;
  }
  allocateGradBuckets();  // stage 2 freed them after the last step
}

void ZeroDataParallel::beginMicroStep(int index, int count) {
  syncing_ = index == count - 1;
  if (opts_.stage != 3) return;
  // Every micro-step reduce-scatters its gradients (no full gradient is kept
  // across micro-steps): the previous one's finish here, then the root unit
  // is gathered for this one.
  syncing_ = true;
  if (index > 0) {
    launchInOrder(true);
    drainFinished(true);
    std::fill(ready_.begin(), ready_.end(), 0);
    nextLaunch_ = 0;
  }
  std::fill(inBackward_.begin(), inBackward_.end(), false);
  if (!unitModules_.empty() && !unitModules_.back()) {
    gatherParams(buckets_.size() - 1);
    allocateGradBucket(buckets_.size() - 1);
  }
}

void ZeroDataParallel::onGradReady(size_t bucket) {
  // Stage 2: backward has reached this bucket, so the next ones' buffers are
  // needed soon. Two ahead, because one backward node may write the last
  // gradient of a bucket and the first of the next (a Linear's weight and
  // bias on either side of a bucket boundary) before any hook runs.
  if (opts_.stage == 2 && ready_[bucket] == 0)
    for (size_t b = bucket + 1; b <= bucket + kBucketsAhead && b < buckets_.size(); ++b)
      allocateGradBucket(b);
  if (!syncing_) return;  // accumulation micro-step: gradients stay local
  if (++ready_[bucket] == buckets_[bucket].params.size()) launchInOrder(false);
}

// Reduce-scatters complete buckets in bucket order (the ranks' collectives
// must be issued in the same order), into a slice buffer of the shard's size.
void ZeroDataParallel::launchInOrder(bool all) {
  while (nextLaunch_ < buckets_.size() &&
         (all || ready_[nextLaunch_] == buckets_[nextLaunch_].params.size())) {
    const size_t b = nextLaunch_++;
    if (firstLaunchUs_ == 0) firstLaunchUs_ = nowMicros();
    allocateGradBucket(b);
    if (all)
      for (auto& p : buckets_[b].params) p.grad();  // materialize stale zeros
    comm::Options o;
    o.tag = static_cast<int>(b);
    if (opts_.gradientWire != DType::F32) {
      launchWire16(b, o);
    } else {
      if (opts_.stage == 1) {
        memory::CategoryScope accounted(memory::Category::Gradients);
        gradShard_[b] = Tensor::empty({shardSize(b)});  // transient: copied into the bucket
      } else if (opts_.stage == 3) {
        memory::CategoryScope accounted(memory::Category::Gradients);
        reduced_[b] = Tensor::empty({shardSize(b)});  // transient: added into the slice
      }
      work_[b] = comm_.reduceScatterAsync(buckets_[b].buffer.data<float>(),
                                          (opts_.stage == 3 ? reduced_[b] : gradShard_[b]).data<float>(),
                                          static_cast<size_t>(shardSize(b)), DType::F32, o);
    }
    if (opts_.stage == 2) freeReducedBuckets();  // during backward
    if (opts_.stage == 3) {
      releaseParams(b);  // its gradients are final: backward is done with it
      drainFinished(false);
    }
  }
}

void ZeroDataParallel::launchWire16(size_t b, const comm::Options& o) {
  // The bucket cast with the mean's 1/N folded in, so the 16-bit sum cannot
  // overflow where fp32 values would not.
  const int64_t n = buckets_[b].buffer.numel();
  memory::CategoryScope accounted(memory::Category::Gradients);
  wireIn_[b] = Tensor::empty({n}, opts_.gradientWire);
  wireOut_[b] = Tensor::empty({shardSize(b)}, opts_.gradientWire);
  narrowTo16(opts_.gradientWire, buckets_[b].buffer.data<float>(), 1.0f / static_cast<float>(comm_.size()),
             static_cast<uint16_t*>(wireIn_[b].rawData()), n);
  work_[b] = comm_.reduceScatterAsync(wireIn_[b].rawData(), wireOut_[b].rawData(),
                                      static_cast<size_t>(shardSize(b)), opts_.gradientWire, o);
}

void ZeroDataParallel::finishGradients() {
  const double backwardEnd = nowMicros();
  launchInOrder(true);
  if (opts_.stage == 3) drainFinished(true);
  waitAll(work_);
  const float scale = 1.0f / static_cast<float>(comm_.size());
  const int64_t r = comm_.rank();
  const bool wire16 = opts_.gradientWire != DType::F32;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t s = shardSize(b);
    // The averaged owned slice: where the update reads it (stage 1: the
    // bucket's own range; stage 2: the persistent shard).
    float* g = opts_.stage == 1 && wire16 ? buckets_[b].buffer.data<float>() + r * s
                                          : gradShard_[b].data<float>();
    if (wire16) {
      widenFrom16(opts_.gradientWire, static_cast<const uint16_t*>(wireOut_[b].rawData()), g, s);
      wireIn_[b] = wireOut_[b] = Tensor();
    } else {
      for (int64_t i = 0; i < s; ++i) g[i] *= scale;
    }
    if (opts_.stage == 1 && !wire16) {
      std::copy(g, g + s, buckets_[b].buffer.data<float>() + r * s);
      gradShard_[b] = Tensor();
    } else if (opts_.stage == 2) {
      // Stage 2: only the owned slice stays; the full gradients go.
      for (auto& p : buckets_[b].params) p.grad() = Tensor();
      buckets_[b].buffer = Tensor();
    }
  }
  // The step's timings, as DataParallel reports them: the reduce-scatters ran
  // from the first launch (during backward: hidden) to here (after it: exposed).
  const double done = nowMicros();
  if (spans_ && done - backwardEnd > 1)
    spans_->span("wait reduce-scatter", "comm", Lane::Compute, backwardEnd, done);
  const double first = firstLaunchUs_ > 0 ? std::min(firstLaunchUs_, backwardEnd) : backwardEnd;
  traffic_.computedUntil(backwardEnd);
  traffic_.exposed(done - backwardEnd);
  traffic_.communicated(done - first, backwardEnd - first);
}

std::vector<GradientPiece> ZeroDataParallel::heldGradients(nn::Module&) {
  std::vector<GradientPiece> held;
  for (size_t i = 0; i < pieces_.size(); ++i)
    held.push_back({pieces_[i].name, pieces_[i].paramOffset, shard_->param(i).grad()});
  return held;
}

void ZeroDataParallel::isolateParameters(const std::vector<std::string>& names) {
  DTRAIN_CHECK(buckets_.empty(), "ZeroDataParallel::isolateParameters after setup");
  DTRAIN_CHECK(opts_.stage != 3 || names.empty(), "ZeRO stage 3 buckets are units of the model");
  isolated_ = names;
}

double ZeroDataParallel::gradNormSquared(nn::Module& model) {
  // This rank's pieces' sum, added to the other shards' exactly.
  return sumOverRanks(comm_, Strategy::gradNormSquared(model), kNormTag);
}

void ZeroDataParallel::applyUpdate(optim::Optimizer& optimizer) {
  shard_->setLr(optimizer.lr());
  shard_->step();
  optimizer.setStepCount(optimizer.stepCount() + 1);
  if (opts_.stage == 3) {
    // The owned slices were updated in place; units gather them when used.
    if (paramFile_) {
      for (size_t b = 0; b < buckets_.size(); ++b) evictShard(b);
      paramFile_->throttle(0);  // out before the next step's activations come in
    }
    if (opts_.gatherEvery > 0 && (step_ + 1) % opts_.gatherEvery == 0) gatherWhole(isReporter());
    traffic_.endStep(comm_);
    return;
  }
  // Every rank's updated slice to every rank: in-place allgathers (exposed:
  // nothing computes meanwhile).
  const double gatherStart = nowMicros();
  const int64_t r = comm_.rank();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t s = shardSize(b);
    comm::Options o;
    o.tag = kGatherTag + static_cast<int>(b);
    float* flat = paramFlat_[b].data<float>();
    work_[b] = comm_.allgatherAsync(flat + r * s, flat, static_cast<size_t>(s), DType::F32, o);
  }
  waitAll(work_);
  const double gatherEnd = nowMicros(), gathered = gatherEnd - gatherStart;
  if (spans_) spans_->span("allgather parameters", "comm", Lane::Compute, gatherStart, gatherEnd);
  traffic_.exposed(gathered);
  traffic_.communicated(gathered, 0);
  traffic_.endStep(comm_);
}

double ZeroDataParallel::reduceMetric(double localValue) {
  return meanOverRanks(comm_, localValue);
}

bool ZeroDataParallel::anyRankStops(bool mine) {
  return meanOverRanks(comm_, mine ? 1.0 : 0.0) > 0;
}

std::vector<memory::RankMemory> ZeroDataParallel::gatherMemory(const memory::RankMemory& mine) {
  return allgatherMemory(comm_, mine);
}

std::map<std::string, double> ZeroDataParallel::stats() const {
  int64_t gradBytes = 0;
  for (const auto& t : paramFlat_) gradBytes += t.numel() * 4;
  std::map<std::string, double> out{
      {"zero_stage", opts_.stage},
      {"bytes_sent_total", static_cast<double>(comm_.bytesSent())},
      {"allreduce_bytes", static_cast<double>(gradBytes)},
      {"optimizer_state_bytes", static_cast<double>(shard_ ? shard_->stateBytes() : 0)},
      {"buckets", static_cast<double>(buckets_.size())},
      {"fusion_mb", opts_.fusionMb}};
  traffic_.report(out);
  return out;
}

std::map<std::string, Tensor> ZeroDataParallel::checkpointState() {
  // Collective. Per bucket and slot, the owned slices are allgathered into a
  // padded flat buffer, then carved into full per-parameter tensors.
  gathered_.clear();
  // The parameters, for the reporter (kept wherever they already were).
  if (opts_.stage == 3) gatherWhole(isReporter() || whole_);
  if (shard_->size() == 0 || !shard_->hasState(0)) return {};
  const int64_t r = comm_.rank();
  const auto slots = shard_->slotNames();
  auto mine = shard_->namedState();
  std::unordered_map<std::string, Tensor*> byName(mine.begin(), mine.end());
  for (const std::string& slot : slots) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const int64_t s = shardSize(b);
      Tensor flat = Tensor::zeros({s * comm_.size()});
      for (size_t i = 0; i < pieces_.size(); ++i) {
        const Piece& p = pieces_[i];
        if (p.bucket != b) continue;
        const Tensor& t = *byName.at(shard_->paramName(i) + "." + slot);
        flat.slice(0, p.bucketOffset, p.bucketOffset + p.length).copyFrom(t);
      }
      comm::Options o;
      o.tag = kStateTag;
      float* f = flat.data<float>();
      comm_.allgather(f + r * s, f, static_cast<size_t>(s), DType::F32, o);
      if (!isReporter()) continue;
      int64_t off = 0;
      for (size_t k = 0; k < buckets_[b].params.size(); ++k) {
        auto& param = buckets_[b].params[k];
        Tensor t = Tensor::empty(param.shape());
        t.view({t.numel()}).copyFrom(flat.slice(0, off, off + param.numel()));
        gathered_[bucketNames_[b][k] + "." + slot] = std::move(t);
        off += param.numel();
      }
    }
  }
  // Every piece is updated at every step: one step count serves all.
  if (isReporter()) {
    int64_t step = 0;
    for (auto& [name, t] : mine)
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".step") == 0) step = *t->data<int64_t>();
    for (const auto& names : bucketNames_)
      for (const auto& name : names) {
        Tensor t = Tensor::zeros({1}, DType::I64);
        *t.data<int64_t>() = step;
        gathered_[name + ".step"] = std::move(t);
      }
  }
  return {};
}

void ZeroDataParallel::syncModel(nn::Module&, optim::Optimizer* optimizer) {
  if (!optimizer || gathered_.empty()) return;
  optimizer->ensureState();
  for (auto& [name, t] : optimizer->namedState()) {
    auto it = gathered_.find(name);
    if (it != gathered_.end()) t->copyFrom(it->second);
  }
  gathered_.clear();
}

}  // namespace dtrain::parallel::zero

namespace dtrain::parallel::zero {

void ZeroDataParallel::finish(nn::Module&, optim::Optimizer&) {
  // Stage 3: the whole model on every rank for the evaluation and saving that
  // follow (and for any use of the model after the run).
  if (opts_.stage == 3) gatherWhole(true);
}

}  // namespace dtrain::parallel::zero
