#include "parallel/sandblaster/ShardedLbfgs.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/Error.h"
#include "parallel/sandblaster/PollBackoff.h"

namespace dtrain::parallel::sandblaster {

using namespace shard;

ShardedLbfgs::ShardedLbfgs(comm::Communicator& comm, int servers, int64_t params)
    : comm_(comm), servers_(servers), params_(params) {
  DTRAIN_CHECK(servers >= 1 && servers < comm.size(), "sandblaster: ", servers, " shards in a world of ",
               comm.size());
}

ShardedLbfgs::Sums ShardedLbfgs::call(Op op, double a, double b, double c) {
  ++commands_;
  const Command cmd{static_cast<double>(op), a, b, c};
  std::vector<Reply> replies(servers_);
  std::vector<comm::WorkPtr> works;
  for (int s = 0; s < servers_; ++s) {
    works.push_back(comm_.isend(&cmd, sizeof cmd, DType::U8, 1 + s, kCommandTag));
    works.push_back(comm_.irecv(&replies[s], sizeof(Reply), DType::U8, 1 + s, kReplyTag));
  }
  for (auto& w : works) waitLong(*w);  // an evaluation's end waits for the slowest unit
  Sums out;
  out.pairs = replyPairs(replies[0], 0);
  for (int s = 0; s < servers_; ++s) {
    const Reply& r = replies[s];
    const int64_t pairs = replyPairs(r, s);
    DTRAIN_CHECK(pairs == out.pairs, "sandblaster: shards disagree on the L-BFGS history (", out.pairs,
                 " and ", pairs, " pairs)");
    out.sum0 += r.v0;
    out.sum1 += r.v1;
    out.max0 = std::max(out.max0, r.v0);
    out.max1 = std::max(out.max1, r.v1);
  }
  return out;
}

void ShardedLbfgs::init(nn::Module& model, const std::vector<std::pair<std::string, Tensor>>& history,
                        int capacity) {
  capacity_ = static_cast<size_t>(capacity);
  std::vector<float> flat;
  flat.reserve(params_);
  for (auto& [name, v] : model.namedParameters()) {
    const Tensor d = v.data().contiguous();
    flat.insert(flat.end(), d.data<float>(), d.data<float>() + d.numel());
  }
  DTRAIN_CHECK(static_cast<int64_t>(flat.size()) == params_, "sandblaster: ", flat.size(),
               " parameters, expected ", params_);
  // History tensors: lbfgs@s.<k> then lbfgs@y.<k> for k = 0..m-1 (checked by the checkpoint).
  std::map<std::string, const Tensor*> byKey;
  for (const auto& [key, t] : history) byKey[key] = &t;
  const size_t pairs = history.size() / 2;
  const Command cmd{static_cast<double>(Op::kInit), static_cast<double>(pairs), static_cast<double>(capacity), 0};
  std::vector<Reply> replies(servers_);
  for (int s = 0; s < servers_; ++s) {
    const auto [lo, hi] = sliceOf(params_, servers_, s);
    const size_t n = static_cast<size_t>(hi - lo);
    std::vector<comm::WorkPtr> works;
    works.push_back(comm_.isend(&cmd, sizeof cmd, DType::U8, 1 + s, kCommandTag));
    works.push_back(comm_.isend(flat.data() + lo, n, DType::F32, 1 + s, kVectorTag));
    for (const char* which : {"s", "y"})
      for (size_t k = 0; k < pairs; ++k) {
        const Tensor* t = byKey.at("lbfgs@" + std::string(which) + "." + std::to_string(k));
        works.push_back(comm_.isend(t->data<float>() + lo, n, DType::F32, 1 + s, kVectorTag));
      }
    works.push_back(comm_.irecv(&replies[s], sizeof(Reply), DType::U8, 1 + s, kReplyTag));
    for (auto& w : works) w->wait();
  }
  ++commands_;
  ro_.clear();
  hDiag_ = 1.0;
  // A shorter history than the saved one: the shards kept the newest pairs.
  const size_t kept = std::min(pairs, capacity_);
  for (size_t k = 0; k < kept; ++k) {
    const Sums r = call(Op::kPairDots, static_cast<double>(k));
    ro_.push_back(1.0 / r.sum0);
    if (k + 1 == kept) hDiag_ = r.sum0 / r.sum1;  // from the newest pair, as step() sets it
  }
}

void ShardedLbfgs::beginEvaluation(int64_t evaluation, int units, int64_t samples) {
  call(Op::kEvalBegin, static_cast<double>(evaluation), units, static_cast<double>(samples));
}

void ShardedLbfgs::endEvaluation(int64_t evaluation) { call(Op::kEvalEnd, static_cast<double>(evaluation)); }

void ShardedLbfgs::clearHistory() {
  ro_.clear();
  hDiag_ = 1.0;
}

void ShardedLbfgs::step(const optim::LbfgsOptions& o, double lossNow, const std::function<double()>& evaluate) {
  const Sums g = call(Op::kStepBegin);
  if (g.max0 <= o.toleranceGrad) return;  // max |g|: at an optimum of this batch  // at an optimum of this batch
  // The two-loop recursion (lbfgsDirection), its dot products on the shards.
  const size_t m = ro_.size();
  std::vector<double> al(m);
  double dot = call(Op::kBackInit).sum0;  // s_{m-1}.q
  for (size_t k = m; k-- > 0;) {
    al[k] = dot * ro_[k];
    dot = call(Op::kBack, static_cast<double>(k), al[k]).sum0;  // s_{k-1}.q
  }
  dot = call(Op::kScale, hDiag_).sum0;  // y_0.q
  for (size_t k = 0; k < m; ++k) {
    const double be = dot * ro_[k];
    dot = call(Op::kForward, static_cast<double>(k), al[k] - be).sum0;  // y_{k+1}.q
  }
  Sums dir = call(Op::kFinishDir);
  double gtd = dir.sum0, dmax = dir.max1;
  if (!(gtd < 0)) {  // not a descent direction: forget the history
    clearHistory();
    dir = call(Op::kSteepest);
    gtd = -dir.sum0;
    dmax = dir.max1;
  }
  // torch's first step: lr scaled down by |g|_1 (g.sum1; the direction is -g, unscaled).
  double t = ro_.empty() ? std::min(1.0, 1.0 / g.sum1) * o.lr : o.lr;
  const double f0 = lossNow;
  bool accepted = false;
  for (int trial = 0; trial < o.maxTrials && t * dmax > 1e-9; ++trial, t *= 0.5) {
    call(Op::kSetX, t);
    const double f = evaluate();
    if (std::isfinite(f) && f <= f0 + o.c1 * t * gtd) {
      accepted = true;
      break;
    }
  }
  if (!accepted) {  // no decrease along d on this batch: stay, start the history again
    call(Op::kSetX, 0.0);
    call(Op::kClear);
    clearHistory();
    return;
  }
  const Sums pair = call(Op::kPair, t);
  const double ys = pair.sum0;
  if (ys > 1e-10) {  // curvature condition: keep the pair
    call(Op::kKeepPair);
    if (ro_.size() == capacity_) ro_.pop_front();
    ro_.push_back(1.0 / ys);
    hDiag_ = ys / pair.sum1;
  }
}

void ShardedLbfgs::gatherParameters(nn::Module& model) {
  call(Op::kGatherX);
  std::vector<float> flat(params_);
  for (int s = 0; s < servers_; ++s) {
    const auto [lo, hi] = sliceOf(params_, servers_, s);
    comm_.irecv(flat.data() + lo, static_cast<size_t>(hi - lo), DType::F32, 1 + s, kVectorTag)->wait();
  }
  int64_t off = 0;
  for (auto& [name, v] : model.namedParameters()) {
    Tensor& d = v.data();
    std::memcpy(d.data<float>(), flat.data() + off, sizeof(float) * d.numel());
    off += d.numel();
  }
}

std::map<std::string, Tensor> ShardedLbfgs::gatherHistory() {
  const size_t m = ro_.size();
  // The shards send as many pairs as they hold: the coordinator receives as many as it counts.
  const int64_t pairs = call(Op::kGatherHistory).pairs;
  DTRAIN_CHECK(pairs == static_cast<int64_t>(m), "sandblaster: the shards hold ", pairs,
               " L-BFGS pairs, the coordinator ", m);
  std::map<std::string, Tensor> out;
  std::vector<Tensor> s(m), y(m);
  for (size_t k = 0; k < m; ++k) {
    s[k] = Tensor::empty({params_});
    y[k] = Tensor::empty({params_});
  }
  // Each shard sends its s slices, then its y slices.
  for (int sh = 0; sh < servers_; ++sh) {
    const auto [lo, hi] = sliceOf(params_, servers_, sh);
    const size_t n = static_cast<size_t>(hi - lo);
    for (auto* list : {&s, &y})
      for (size_t k = 0; k < m; ++k)
        comm_.irecv((*list)[k].data<float>() + lo, n, DType::F32, 1 + sh, kVectorTag)->wait();
  }
  for (size_t k = 0; k < m; ++k) {
    out.emplace("lbfgs@s." + std::to_string(k), s[k]);
    out.emplace("lbfgs@y." + std::to_string(k), y[k]);
  }
  return out;
}

void ShardedLbfgs::done() {
  const Command cmd{static_cast<double>(Op::kDone), 0, 0, 0};
  for (int s = 0; s < servers_; ++s) comm_.isend(&cmd, sizeof cmd, DType::U8, 1 + s, kCommandTag)->wait();
}

}  // namespace dtrain::parallel::sandblaster
