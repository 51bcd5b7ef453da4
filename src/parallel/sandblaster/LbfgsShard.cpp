#include "parallel/sandblaster/LbfgsShard.h"

#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <vector>

#include "core/Error.h"
#include "optim/Lbfgs.h"
#include "parallel/sandblaster/PollBackoff.h"
#include "parallel/sandblaster/ShardProtocol.h"

namespace dtrain::parallel::sandblaster {

namespace {

using namespace shard;

// The two-loop recursion's s_k.q and y_k.q on a slice, summed as
// lbfgsDirection (optim/Lbfgs.cpp) sums them: one shard is bitwise it.
double dotQ(const std::vector<float>& a, const std::vector<double>& q) {
  double s = 0;
  for (size_t j = 0; j < q.size(); ++j) s += a[j] * q[j];
  return s;
}

class Shard {
 public:
  Shard(comm::Communicator& comm, int servers, int64_t params)
      : comm_(comm), servers_(servers), workers_(comm.size() - 1 - servers) {
    const auto [lo, hi] = sliceOf(params, servers, comm.rank() - 1);
    n_ = static_cast<size_t>(hi - lo);
    x_.assign(n_, 0.0f);
    peers_.resize(workers_);
    for (int w = 0; w < workers_; ++w) postWorker(w);
  }

  ShardStats run() {
    postCommand();
    PollBackoff backoff;
    for (;;) {
      bool progressed = false;
      for (int w = 0; w < workers_; ++w) progressed |= serveWorker(w);
      if (endPending_ && unitsIn_ == unitGrad_.size()) {
        sumUnits();
        endPending_ = false;
        reply({});
        progressed = true;
      }
      if (!endPending_ && !doneCommand_ && command_->test()) {
        command_->wait();
        const Command c = cmd_;
        if (static_cast<Op>(c.op) == Op::kDone)
          doneCommand_ = true;
        else
          handle(c), postCommand();
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
    return stats_;
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
      p.sent = std::make_shared<std::vector<float>>(x_);
      p.send = comm_.isend(p.sent->data(), n_, DType::F32, workerRank(w), kParamsSliceTag);
      ++stats_.pulls;
      p.pullRecv = comm_.irecv(&p.pull, sizeof(double), DType::U8, workerRank(w), kPullTag);
      progressed = true;
    }
    if (!p.gone && p.headRecv->test() && p.gradRecv->test()) {
      p.headRecv->wait();
      p.gradRecv->wait();
      const auto evaluation = static_cast<int64_t>(p.head[0]);
      if (evaluation < 0) {  // goodbye: nothing more from this worker
        ++byes_;
        p.gone = true;
        return true;
      }
      const auto unit = static_cast<size_t>(p.head[1]);
      if (evaluation == evaluation_ && unit < unitGrad_.size() && !unitDone_[unit]) {
        std::swap(unitGrad_[unit], p.grad);  // the first copy of a unit wins
        unitDone_[unit] = 1;
        ++unitsIn_;
        ++stats_.unitGrads;
      } else {
        ++stats_.dropped;
      }
      postGrad(w);
      progressed = true;
    }
    return progressed;
  }

  void reply(Reply r) {
    if (replySend_) replySend_->wait();  // the coordinator read it before this command
    r.pairs = static_cast<double>(s_.size());
    reply_ = r;
    replySend_ = comm_.isend(&reply_, sizeof(Reply), DType::U8, 0, kReplyTag);
  }
  void sendVector(const std::vector<float>& v) {
    waitLong(*comm_.isend(v.data(), n_, DType::F32, 0, kVectorTag));
  }
  void recvVector(std::vector<float>& v) {
    v.assign(n_, 0.0f);
    waitLong(*comm_.irecv(v.data(), n_, DType::F32, 0, kVectorTag));
  }

  // The evaluation's gradient: unit means weighted by their samples, summed in
  // unit order (as the unsharded coordinator sums them).
  void sumUnits() {
    gEval_.assign(n_, 0.0f);
    const size_t units = unitGrad_.size();
    for (size_t u = 0; u < units; ++u) {
      const float share = static_cast<float>(unitStart_[u + 1] - unitStart_[u]) / static_cast<float>(samples_);
      const std::vector<float>& g = unitGrad_[u];
      for (size_t j = 0; j < n_; ++j) gEval_[j] += share * g[j];
    }
  }

  double maxAbs(const std::vector<float>& v) const {
    double m = 0;
    for (float e : v) m = std::max(m, static_cast<double>(std::fabs(e)));
    return m;
  }

  void handle(const Command& c) {
    switch (static_cast<Op>(c.op)) {
      case Op::kInit: {
        capacity_ = static_cast<size_t>(c.b);
        recvVector(x_);
        const auto pairs = static_cast<size_t>(c.a);
        std::vector<std::vector<float>> s(pairs), y(pairs);
        for (auto& v : s) recvVector(v);
        for (auto& v : y) recvVector(v);
        s_.assign(s.begin(), s.end());
        y_.assign(y.begin(), y.end());
        while (s_.size() > capacity_) {  // a shorter --lbfgs-history: the newest pairs
          s_.pop_front();
          y_.pop_front();
        }
        return reply({});
      }
      case Op::kPairDots: {
        const auto k = static_cast<size_t>(c.a);
        DTRAIN_CHECK(k < s_.size(), "sandblaster shard: no pair ", k);
        return reply({optim::lbfgsDot(y_[k], s_[k]), optim::lbfgsDot(y_[k], y_[k])});
      }
      case Op::kEvalBegin: {
        evaluation_ = static_cast<int64_t>(c.a);
        const auto units = static_cast<size_t>(c.b);
        samples_ = static_cast<int64_t>(c.c);
        unitStart_.resize(units + 1);
        for (size_t u = 0; u <= units; ++u) unitStart_[u] = samples_ * static_cast<int64_t>(u) / static_cast<int64_t>(units);
        unitGrad_.resize(units);
        unitDone_.assign(units, 0);
        unitsIn_ = 0;
        return reply({});
      }
      case Op::kEvalEnd:
        DTRAIN_CHECK(static_cast<int64_t>(c.a) == evaluation_, "sandblaster shard: end of evaluation ",
                     c.a, " during ", evaluation_);
        endPending_ = true;  // answered by run() once every unit is in
        return;
      case Op::kStepBegin: {
        g_ = gEval_;
        x0_ = x_;
        double gsum = 0;
        for (float v : g_) gsum += std::fabs(v);
        return reply({maxAbs(g_), gsum});
      }
      case Op::kBackInit:
        q_.resize(n_);
        for (size_t j = 0; j < n_; ++j) q_[j] = -static_cast<double>(g_[j]);
        return reply({s_.empty() ? 0.0 : dotQ(s_.back(), q_)});
      case Op::kBack: {
        const auto k = static_cast<size_t>(c.a);
        for (size_t j = 0; j < n_; ++j) q_[j] -= c.b * y_.at(k)[j];
        return reply({k > 0 ? dotQ(s_[k - 1], q_) : 0.0});
      }
      case Op::kScale:
        for (double& v : q_) v *= c.a;
        return reply({s_.empty() ? 0.0 : dotQ(y_[0], q_)});
      case Op::kForward: {
        const auto k = static_cast<size_t>(c.a);
        for (size_t j = 0; j < n_; ++j) q_[j] += s_.at(k)[j] * c.b;
        return reply({k + 1 < s_.size() ? dotQ(y_[k + 1], q_) : 0.0});
      }
      case Op::kFinishDir:
        d_.assign(q_.begin(), q_.end());
        return reply({optim::lbfgsDot(g_, d_), maxAbs(d_)});
      case Op::kSteepest:
        s_.clear();
        y_.clear();
        d_.resize(n_);
        for (size_t j = 0; j < n_; ++j) d_[j] = -g_[j];
        return reply({optim::lbfgsDot(g_, g_), maxAbs(d_)});
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
        return reply({optim::lbfgsDot(yNew_, sNew_), optim::lbfgsDot(yNew_, yNew_)});
      }
      case Op::kKeepPair:
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
        return sendVector(x_);
      case Op::kGatherHistory:
        reply({});
        for (const auto& v : s_) sendVector(v);
        for (const auto& v : y_) sendVector(v);
        return;
      case Op::kDone:
        return;
    }
    DTRAIN_CHECK(false, "sandblaster shard: unknown command ", c.op);
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
  size_t n_ = 0, capacity_ = 10;
  std::vector<Peer> peers_;
  Command cmd_;
  comm::WorkPtr command_;
  Reply reply_;
  comm::WorkPtr replySend_;
  // The slice of the parameters and of L-BFGS's vectors.
  std::vector<float> x_, x0_, g_, gEval_, d_, sNew_, yNew_;
  std::vector<double> q_;
  std::deque<std::vector<float>> s_, y_;
  // The evaluation in progress.
  int64_t evaluation_ = 0, samples_ = 0;
  std::vector<int64_t> unitStart_;
  std::vector<std::vector<float>> unitGrad_;
  std::vector<char> unitDone_;
  size_t unitsIn_ = 0;
  bool endPending_ = false, doneCommand_ = false;
  int byes_ = 0;
  ShardStats stats_;
};

}  // namespace

ShardStats runSandblasterShard(comm::Communicator& comm, int servers, int64_t params) {
  DTRAIN_CHECK(comm.rank() >= 1 && comm.rank() <= servers, "sandblaster: shard ranks are 1..", servers);
  return Shard(comm, servers, params).run();
}

}  // namespace dtrain::parallel::sandblaster
