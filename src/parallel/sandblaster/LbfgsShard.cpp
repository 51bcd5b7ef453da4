#include "parallel/sandblaster/LbfgsShard.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "core/Error.h"
#include "optim/Lbfgs.h"
#include "parallel/sandblaster/PollBackoff.h"
#include "parallel/sandblaster/ShardProtocol.h"
#include "parallel/sandblaster/ShardState.h"

namespace dtrain::parallel::sandblaster {

using namespace shard;

namespace {

// The two-loop recursion's s_k.q and y_k.q on a slice, summed as
// lbfgsDirection (optim/Lbfgs.cpp) sums them: one shard is bitwise it.
double shardDotQ(const std::vector<float>& a, const std::vector<double>& q) {
  double s = 0;
  for (size_t j = 0; j < q.size(); ++j) s += a[j] * q[j];
  return s;
}

double shardMaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float e : v) m = std::max(m, static_cast<double>(std::fabs(e)));
  return m;
}

}  // namespace

void ShardState::reply(Reply r) {
  r.pairs = static_cast<double>(s_.size());
  link_.reply(r);
}

bool ShardState::acceptGradient(const GradHead& head, std::vector<float>& grad) {
  if (head.goodbye()) return false;
  DTRAIN_CHECK(grad.size() == n_, "sandblaster shard: a gradient slice of ", grad.size(), " floats, not ", n_);
  const auto unit = static_cast<size_t>(head.unit);  // in [0, kMaxUnits): decodeGradHead
  if (head.evaluation == evaluation_ && unit < unitGrad_.size() && !unitDone_[unit]) {
    std::swap(unitGrad_[unit], grad);  // the first copy of a unit wins
    unitDone_[unit] = 1;
    ++unitsIn_;
    ++stats_.unitGrads;
  } else {
    ++stats_.dropped;
  }
  return true;
}

// The evaluation's gradient: unit means weighted by their samples, summed in
// unit order (as the unsharded coordinator sums them).
void ShardState::sumUnits() {
  gEval_.assign(n_, 0.0f);
  const size_t units = unitGrad_.size();
  for (size_t u = 0; u < units; ++u) {
    const float share = static_cast<float>(unitStart_[u + 1] - unitStart_[u]) / static_cast<float>(samples_);
    const std::vector<float>& g = unitGrad_[u];
    for (size_t j = 0; j < n_; ++j) gEval_[j] += share * g[j];
  }
}

void ShardState::finishEvaluation() {
  sumUnits();
  endPending_ = false;
  reply({});
}

void ShardState::handle(const Command& c) {
  // A history index of the command's `a` (kPairDots, kBack, kForward).
  auto pairIndex = [&](const char* what) {
    DTRAIN_CHECK(!s_.empty(), "sandblaster shard: ", what, " ", c.a, " of an empty L-BFGS history");
    return static_cast<size_t>(wholeNumber(c.a, 0, static_cast<int64_t>(s_.size()) - 1, what));
  };
  switch (opOf(c)) {
    case Op::kInit: {
      const auto pairs = wholeNumber(c.a, 0, kMaxCount, "kInit's history pairs");
      capacity_ = static_cast<size_t>(wholeNumber(c.b, 1, kMaxCount, "kInit's history capacity"));
      link_.recvVector(x_);
      // One by one (no allocation sized by the message): s slices, then y slices.
      std::vector<std::vector<float>> s, y;
      for (auto* list : {&s, &y})
        for (int64_t k = 0; k < pairs; ++k) link_.recvVector(list->emplace_back());
      s_.assign(s.begin(), s.end());
      y_.assign(y.begin(), y.end());
      while (s_.size() > capacity_) {  // a shorter --lbfgs-history: the newest pairs
        s_.pop_front();
        y_.pop_front();
      }
      pairReady_ = false;
      return reply({});
    }
    case Op::kPairDots: {
      const size_t k = pairIndex("kPairDots' pair");
      return reply({optim::lbfgsDot(y_[k], s_[k]), optim::lbfgsDot(y_[k], y_[k])});
    }
    case Op::kEvalBegin: {
      evaluation_ = wholeNumber(c.a, 0, kMaxCount, "kEvalBegin's evaluation");
      const auto units = wholeNumber(c.b, 1, kMaxUnits, "kEvalBegin's units");
      samples_ = wholeNumber(c.c, units, kMaxSamples, "kEvalBegin's samples");
      unitStart_.resize(static_cast<size_t>(units) + 1);
      for (int64_t u = 0; u <= units; ++u) unitStart_[u] = samples_ * u / units;
      unitGrad_.resize(static_cast<size_t>(units));
      unitDone_.assign(static_cast<size_t>(units), 0);
      unitsIn_ = 0;
      return reply({});
    }
    case Op::kEvalEnd: {
      const int64_t evaluation = wholeNumber(c.a, 0, kMaxCount, "kEvalEnd's evaluation");
      DTRAIN_CHECK(evaluation == evaluation_, "sandblaster shard: end of evaluation ", evaluation, " during ",
                   evaluation_);
      endPending_ = true;  // answered by finishEvaluation() once every unit is in
      return;
    }
    case Op::kStepBegin: {
      g_ = gEval_;
      x0_ = x_;
      double gsum = 0;
      for (float v : g_) gsum += std::fabs(v);
      return reply({shardMaxAbs(g_), gsum});
    }
    case Op::kBackInit:
      for (size_t j = 0; j < n_; ++j) q_[j] = -static_cast<double>(g_[j]);
      return reply({s_.empty() ? 0.0 : shardDotQ(s_.back(), q_)});
    case Op::kBack: {
      const size_t k = pairIndex("kBack's pair");
      for (size_t j = 0; j < n_; ++j) q_[j] -= c.b * y_[k][j];
      return reply({k > 0 ? shardDotQ(s_[k - 1], q_) : 0.0});
    }
    case Op::kScale:
      for (double& v : q_) v *= c.a;
      return reply({s_.empty() ? 0.0 : shardDotQ(y_[0], q_)});
    case Op::kForward: {
      const size_t k = pairIndex("kForward's pair");
      for (size_t j = 0; j < n_; ++j) q_[j] += s_[k][j] * c.b;
      return reply({k + 1 < s_.size() ? shardDotQ(y_[k + 1], q_) : 0.0});
    }
    case Op::kFinishDir:
      d_.assign(q_.begin(), q_.end());
      return reply({optim::lbfgsDot(g_, d_), shardMaxAbs(d_)});
    case Op::kSteepest:
      s_.clear();
      y_.clear();
      for (size_t j = 0; j < n_; ++j) d_[j] = -g_[j];
      return reply({optim::lbfgsDot(g_, g_), shardMaxAbs(d_)});
    case Op::kSetX:
      for (size_t j = 0; j < n_; ++j) x_[j] = static_cast<float>(x0_[j] + c.a * d_[j]);
      return reply({});
    case Op::kPair: {
      sNew_.resize(n_);
      yNew_.resize(n_);
      for (size_t j = 0; j < n_; ++j) {
        sNew_[j] = static_cast<float>(c.a * d_[j]);
        yNew_[j] = gEval_[j] - g_[j];
      }
      pairReady_ = true;
      return reply({optim::lbfgsDot(yNew_, sNew_), optim::lbfgsDot(yNew_, yNew_)});
    }
    case Op::kKeepPair:
      DTRAIN_CHECK(pairReady_, "sandblaster shard: kKeepPair without a pair (kPair) to keep");
      pairReady_ = false;
      if (s_.size() == capacity_) {
        s_.pop_front();
        y_.pop_front();
      }
      s_.push_back(std::move(sNew_));
      y_.push_back(std::move(yNew_));
      return reply({});
    case Op::kClear:
      s_.clear();
      y_.clear();
      return reply({});
    case Op::kGatherX:
      reply({});
      return link_.sendVector(x_);
    case Op::kGatherHistory:
      reply({});
      for (const auto& v : s_) link_.sendVector(v);
      for (const auto& v : y_) link_.sendVector(v);
      return;
    case Op::kDone:
      return;
  }
}

namespace {

// The shard's polling loop: the coordinator's commands and every worker's
// pulls and unit gradients, fed to its ShardState.
class Shard : public ShardLink {
 public:
  Shard(comm::Communicator& comm, int servers, int64_t params)
      : comm_(comm), servers_(servers), workers_(comm.size() - 1 - servers),
        state_(sliceSize(params, servers, comm.rank() - 1), *this) {
    n_ = state_.size();
    peers_.resize(workers_);
    for (int w = 0; w < workers_; ++w) postWorker(w);
  }

  ShardStats run() {
    postCommand();
    PollBackoff backoff;
    for (;;) {
      bool progressed = false;
      for (int w = 0; w < workers_; ++w) progressed |= serveWorker(w);
      if (state_.evaluationComplete()) {
        state_.finishEvaluation();
        progressed = true;
      }
      if (!state_.evaluationPending() && !doneCommand_ && command_->test()) {
        command_->wait();
        const Command c = cmd_;
        if (opOf(c) == Op::kDone)
          doneCommand_ = true;
        else
          state_.handle(c), postCommand();
        progressed = true;
      }
      // Over when the coordinator says so and every worker has said goodbye
      // (after its last gradient slices, which this shard must still receive).
      if (doneCommand_ && byes_ == workers_) break;
      if (progressed)
        backoff.progressed();
      else
        backoff.nothingArrived();
    }
    finish();
    return state_.stats();
  }

  void reply(Reply r) override {
    if (replySend_) replySend_->wait();  // the coordinator read it before this command
    reply_ = r;
    replySend_ = comm_.isend(&reply_, sizeof(Reply), DType::U8, 0, kReplyTag);
  }
  void sendVector(const std::vector<float>& v) override {
    waitLong(*comm_.isend(v.data(), n_, DType::F32, 0, kVectorTag));
  }
  void recvVector(std::vector<float>& v) override {
    v.assign(n_, 0.0f);
    waitLong(*comm_.irecv(v.data(), n_, DType::F32, 0, kVectorTag));
  }

 private:
  struct Peer {
    double pull = 0;                      // the evaluation it asks for (unused: x is current)
    double head[2] = {0, 0};              // evaluation, unit
    std::vector<float> grad;
    comm::WorkPtr pullRecv, headRecv, gradRecv;
    std::shared_ptr<std::vector<float>> sent;  // the slice in flight, kept alive
    comm::WorkPtr send;
    bool gone = false;  // it said goodbye
  };

  static size_t sliceSize(int64_t params, int servers, int i) {
    const auto [lo, hi] = sliceOf(params, servers, i);
    return static_cast<size_t>(hi - lo);
  }
  int workerRank(int w) const { return servers_ + 1 + w; }

  void postWorker(int w) {
    Peer& p = peers_[w];
    p.pullRecv = comm_.irecv(&p.pull, sizeof(double), DType::U8, workerRank(w), kPullTag);
    postGrad(w);
  }
  void postGrad(int w) {
    Peer& p = peers_[w];
    p.grad.resize(n_);
    p.headRecv = comm_.irecv(p.head, sizeof p.head, DType::U8, workerRank(w), kGradHeadTag);
    p.gradRecv = comm_.irecv(p.grad.data(), n_, DType::F32, workerRank(w), kGradSliceTag);
  }
  void postCommand() { command_ = comm_.irecv(&cmd_, sizeof(Command), DType::U8, 0, kCommandTag); }

  bool serveWorker(int w) {
    Peer& p = peers_[w];
    bool progressed = false;
    if (p.pullRecv->test()) {
      p.pullRecv->wait();
      if (p.send) p.send->wait();  // the worker took the previous slice before asking again
      p.sent = std::make_shared<std::vector<float>>(state_.parameters());
      p.send = comm_.isend(p.sent->data(), n_, DType::F32, workerRank(w), kParamsSliceTag);
      state_.countPull();
      p.pullRecv = comm_.irecv(&p.pull, sizeof(double), DType::U8, workerRank(w), kPullTag);
      progressed = true;
    }
    if (!p.gone && p.headRecv->test() && p.gradRecv->test()) {
      p.headRecv->wait();
      p.gradRecv->wait();
      if (!state_.acceptGradient(decodeGradHead(p.head), p.grad)) {  // goodbye: nothing more from it
        ++byes_;
        p.gone = true;
        return true;
      }
      postGrad(w);
      progressed = true;
    }
    return progressed;
  }

  // The workers have been told the run is over; withdraw what they will not send.
  void finish() {
    if (replySend_) replySend_->wait();
    for (Peer& p : peers_) {
      p.pullRecv->cancelIfPending();
      if (p.send) p.send->wait();
    }
  }

  comm::Communicator& comm_;
  int servers_, workers_;
  size_t n_ = 0;
  std::vector<Peer> peers_;
  Command cmd_;
  comm::WorkPtr command_;
  Reply reply_;
  comm::WorkPtr replySend_;
  bool doneCommand_ = false;
  int byes_ = 0;
  ShardState state_;
};

}  // namespace

ShardStats runSandblasterShard(comm::Communicator& comm, int servers, int64_t params) {
  DTRAIN_CHECK(comm.rank() >= 1 && comm.rank() <= servers, "sandblaster: shard ranks are 1..", servers);
  return Shard(comm, servers, params).run();
}

}  // namespace dtrain::parallel::sandblaster
