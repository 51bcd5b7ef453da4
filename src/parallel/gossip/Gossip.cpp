#include "parallel/gossip/Gossip.h"

#include <algorithm>
#include <cmath>

#include "core/Error.h"
#include "core/Log.h"
#include "core/Timer.h"
#include "parallel/MemoryGather.h"
#include "parallel/RankSums.h"
#include "parallel/allreduce/DataParallel.h"
#include "parallel/gossip/Topology.h"

namespace dtrain::parallel::gossip {

namespace {
// Far above the trainer's and DataParallel's tags.
constexpr int kRoundTag = (1 << 24) + 1;
constexpr int kAverageTag = (1 << 24) + 2;
constexpr int kRankStateTag = (1 << 24) + 3;
constexpr int kMetricTag = (1 << 24) + 4;

const Tensor* findTensor(const std::map<std::string, Tensor>& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}
}  // namespace

Gossip::Gossip(comm::Communicator& comm, GossipOptions options) : comm_(comm), opts_(std::move(options)) {
  DTRAIN_CHECK_USAGE(opts_.every >= 1, "--gossip-every must be >= 1 (got ", opts_.every, ")");
  peers_ = neighbours(opts_.topology, comm_.rank(), comm_.size());
}

void Gossip::setup(nn::Module& model, optim::Optimizer& optimizer) {
  DTRAIN_CHECK(params_.empty(), "Gossip::setup called twice");
  model_ = &model;
  optimizer_ = &optimizer;
  broadcastReplicaState(comm_, model, optimizer);  // the ranks start from one model
  for (auto& [name, p] : model.namedParameters()) {
    if (!p.requiresGrad()) continue;  // frozen (LoRA's base): never moves
    DTRAIN_CHECK(p.data().isContiguous() && p.data().dtype() == DType::F32,
                 "gossip: parameter ", name, " is not a contiguous f32 tensor");
    params_.emplace_back(name, p);
  }
  for (auto& [name, p] : params_) tensors_.emplace_back(name, &p.data());
  for (auto& [name, t] : model.namedBuffers())
    if (t->dtype() == DType::F32 && t->isContiguous()) tensors_.emplace_back(name, t);
  for (auto& [name, t] : tensors_) numel_ += t->numel();
  mine_.resize(static_cast<size_t>(numel_));
  theirs_.resize(static_cast<size_t>(numel_) * peers_.size());
  mean_.resize(static_cast<size_t>(numel_));
}

void Gossip::pack(float* out) const {
  for (auto& [name, t] : tensors_) out = std::copy_n(t->data<float>(), t->numel(), out);
}

void Gossip::unpack(const float* in) {
  for (auto& [name, t] : tensors_) {
    std::copy_n(in, t->numel(), t->data<float>());
    in += t->numel();
  }
}

void Gossip::applyUpdate(optim::Optimizer& optimizer) {
  optimizer.step();
  ++steps_;
  if ((step_ + 1) % opts_.every == 0) round();
}

void Gossip::round() {
  const double t0 = nowMicros();
  pack(mine_.data());
  const size_t n = static_cast<size_t>(numel_);
  std::vector<comm::WorkPtr> work;
  for (size_t i = 0; i < peers_.size(); ++i) {
    work.push_back(comm_.irecv(theirs_.data() + i * n, n, DType::F32, peers_[i], kRoundTag));
    work.push_back(comm_.isend(mine_.data(), n, DType::F32, peers_[i], kRoundTag));
  }
  for (auto& w : work) w->wait();
  // The sum in rank order, this rank at its place: on the complete graph every
  // rank adds the same numbers in the same order.
  std::vector<const float*> terms;
  size_t next = 0;
  for (int r = 0; r < comm_.size(); ++r) {
    if (r == comm_.rank()) terms.push_back(mine_.data());
    else if (next < peers_.size() && peers_[next] == r) terms.push_back(theirs_.data() + n * next++);
  }
  const float w = 1.0f / static_cast<float>(terms.size());
  std::fill(mean_.begin(), mean_.end(), 0.0f);
  for (const float* t : terms)
    for (size_t k = 0; k < n; ++k) mean_[k] += t[k];
  for (float& v : mean_) v *= w;
  unpack(mean_.data());
  ++rounds_;
  const double t1 = nowMicros();
  commUs_ += t1 - t0;
  if (spans_) spans_->span("gossip round " + std::to_string(rounds_), "comm", Lane::Comm, t0, t1);
}

double Gossip::averageAll() {
  pack(mine_.data());
  std::vector<float> mean = mine_;
  comm::Options o;
  o.tag = kAverageTag;
  comm_.allreduce(mean.data(), mean.data(), mean.size(), DType::F32, o);
  double dist = 0, norm = 0;
  for (size_t k = 0; k < mean.size(); ++k) {
    mean[k] /= static_cast<float>(comm_.size());
    dist += (mine_[k] - mean[k]) * static_cast<double>(mine_[k] - mean[k]);
    norm += mean[k] * static_cast<double>(mean[k]);
  }
  unpack(mean.data());
  return reduceMetric(norm > 0 ? std::sqrt(dist / norm) : 0.0);
}

void Gossip::finish(nn::Module&, optim::Optimizer&) { consensus_ = averageAll(); }

NamedState Gossip::perRankState() {
  NamedState out;
  for (auto& [name, t] : tensors_) out.emplace_back("gossip.model." + name, t);
  for (auto& [name, t] : optimizer_->namedState()) out.emplace_back("gossip.inner." + name, t);
  return out;
}

std::map<std::string, Tensor> Gossip::checkpointState() {
  optimizer_->ensureState();  // every rank's state has the same names
  return gatherRankState(comm_, perRankState(), kRankStateTag);
}

void Gossip::loadCheckpointState(const std::map<std::string, Tensor>& saved) {
  const std::string prefix = "rank" + std::to_string(comm_.rank()) + ".gossip.";
  auto it = saved.lower_bound(prefix);
  if (it == saved.end() || it->first.compare(0, prefix.size(), prefix) != 0) {
    if (isReporter() && saved.count("rank0.gossip.model." + tensors_.front().first))
      log::info("gossip: resuming with another number of ranks: every rank starts from rank 0's model");
    return;
  }
  optimizer_->ensureState();
  for (auto& [name, t] : perRankState()) {
    const Tensor* s = findTensor(saved, "rank" + std::to_string(comm_.rank()) + "." + name);
    DTRAIN_CHECK(s != nullptr && s->numel() == t->numel() && s->dtype() == t->dtype(), "checkpoint: gossip state ",
                 name, " is missing or does not match this run's (resume with the model and --optimizer it was "
                 "saved with)");
    t->copyFrom(s->shape() == t->shape() ? *s : s->contiguous().reshape(t->shape()));
  }
}

std::vector<memory::RankMemory> Gossip::gatherMemory(const memory::RankMemory& mine) {
  return allgatherMemory(comm_, mine);
}

double Gossip::reduceMetric(double localValue) {
  return sumOverRanks(comm_, localValue, kMetricTag) / comm_.size();
}

std::map<std::string, double> Gossip::stats() const {
  const double steps = static_cast<double>(std::max<int64_t>(1, steps_));
  const double sent = static_cast<double>(comm_.bytesSent());
  return {{"gossip_rounds", static_cast<double>(rounds_)},
          {"gossip_every", static_cast<double>(opts_.every)},
          {"gossip_degree", static_cast<double>(peers_.size())},
          {"consensus_distance", consensus_},
          {"comm_ms", commUs_ / 1e3 / steps},
          {"comm_s_total", commUs_ / 1e6},
          {"bytes_sent_total", sent},
          {"bytes_sent_per_worker", sent / steps}};
}

}  // namespace dtrain::parallel::gossip
