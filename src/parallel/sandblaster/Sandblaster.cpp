#include "parallel/sandblaster/Sandblaster.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/Error.h"
#include "core/Rng.h"
#include "parallel/sandblaster/PollBackoff.h"
#include "parallel/sandblaster/ShardProtocol.h"
#include "parallel/sandblaster/UnitProtocol.h"

namespace dtrain::parallel::sandblaster {

namespace {
using Clock = std::chrono::steady_clock;
using namespace unit;
Tensor emptyFromMeta(const SampleMeta& m) { return Tensor::empty(m.shape, m.dtype); }
std::vector<autograd::Variable*> sandblasterParams(nn::Module& model,
                                                   std::vector<std::pair<std::string, autograd::Variable>>& keep) {
  keep = model.namedParameters();
  std::vector<autograd::Variable*> out;
  for (auto& [name, v] : keep) out.push_back(&v);
  return out;
}
}  // namespace

// What the coordinator has in flight with one worker.
struct SandblasterCoordinator::Peer {
  int64_t paramsEvaluation = -1;  // the evaluation whose parameters it holds
  bool busy = false;
  int unit = -1;
  bool backup = false;  // its unit is a backup copy
  std::vector<int64_t> header = std::vector<int64_t>(kHeaderSize, 0);
  std::shared_ptr<std::vector<float>> params;  // kept alive until sent
  std::vector<comm::WorkPtr> sends;
  AnswerHead answer{};
  std::vector<float> grad;
  comm::WorkPtr answerHead, answerGrad;
};

SandblasterCoordinator::SandblasterCoordinator(comm::Communicator& comm, SandblasterOptions o)
    : comm_(comm), o_(std::move(o)), workers_(comm.size() - 1 - o_.servers) {
  DTRAIN_CHECK(comm.rank() == 0, "sandblaster: the coordinator is rank 0");
  DTRAIN_CHECK_USAGE(workers_ >= 1, "--strategy sandblaster needs --workers >= 1 besides its coordinator",
                     o_.servers ? " and its shards" : "");
  if (o_.workUnits <= 0) o_.workUnits = 4 * workers_;
  unitsByWorker_.assign(workers_, 0);
}

SandblasterCoordinator::~SandblasterCoordinator() = default;

void SandblasterCoordinator::setup(nn::Module& model, optim::Optimizer& optimizer) {
  params_ = 0;
  for (auto& [name, v] : model.namedParameters()) params_ += v.numel();
  if (o_.servers > 0) {
    lbfgs_ = dynamic_cast<optim::Lbfgs*>(&optimizer);
    DTRAIN_CHECK(lbfgs_, "sandblaster: the shards run L-BFGS, not ", optimizer.name());
    shards_ = std::make_unique<ShardedLbfgs>(comm_, o_.servers, params_);
    // The model's parameters and a resumed history go to the shards once.
    const auto history = lbfgs_->globalState();
    for (const auto& [key, t] : history) gatherBytes_ += t.nbytes();
    shards_->init(model, history, lbfgs_->options().history);
    gatherBytes_ += params_ * static_cast<int64_t>(sizeof(float));
  }
  for (int w = 0; w < workers_; ++w) {
    peers_.push_back(std::make_unique<Peer>());
    peers_.back()->grad.resize(params_);
    postAnswer(w);
  }
}

void SandblasterCoordinator::postAnswer(int w) {
  Peer& p = *peers_[w];
  p.answerHead = comm_.irecv(&p.answer, sizeof(AnswerHead), DType::U8, workerRank(w), kAnswerHeadTag);
  // Sharded, the gradient goes to the shards; the coordinator hears the loss.
  if (!shards_)
    p.answerGrad = comm_.irecv(p.grad.data(), p.grad.size(), DType::F32, workerRank(w), kAnswerGradTag);
}

void SandblasterCoordinator::assign(int w, int unit) {
  Peer& p = *peers_[w];
  for (auto& s : p.sends) s->wait();  // it answered, so these are long done
  p.sends.clear();
  const bool sendParams = p.paramsEvaluation != evaluation_;
  const int64_t lo = unitStart_[unit], hi = unitStart_[unit + 1];
  Tensor xs = x_.slice(0, lo, hi), ys = y_.slice(0, lo, hi);
  std::fill(p.header.begin(), p.header.end(), 0);
  p.header[kKind] = kCompute;
  p.header[kEvaluation] = evaluation_;
  p.header[kUnit] = unit;
  // 1: the parameters follow; 2: pull them from the shards.
  p.header[kParamsFollow] = sendParams ? (shards_ ? kFromShards : kFromCoordinator) : kNoParams;
  if (o_.workersRead) {
    p.header[kSamples] = kWorkerReads;
    p.header[kBatchEpoch] = batchEpoch_;
    p.header[kBatchStep] = batchStep_;
    p.header[kBatchSamples] = x_.shape()[0];
    p.header[kUnitLo] = lo;
    p.header[kUnitHi] = hi;
  } else {
    p.header[kSamples] = kSamplesFollow;
    putShape(&p.header[kXMeta], xs);
    putShape(&p.header[kYMeta], ys);
  }
  const int dst = workerRank(w);
  p.sends.push_back(comm_.isend(p.header.data(), p.header.size(), DType::I64, dst, kUnitTag));
  if (sendParams && !shards_) {
    p.params = paramsNow_;
    p.sends.push_back(comm_.isend(p.params->data(), p.params->size(), DType::F32, dst, kParamsTag));
    p.paramsEvaluation = evaluation_;
  }
  if (!o_.workersRead) {
    p.sends.push_back(comm_.isend(xs.rawData(), xs.nbytes(), DType::U8, dst, kXTag));
    p.sends.push_back(comm_.isend(ys.rawData(), ys.nbytes(), DType::U8, dst, kYTag));
    sampleBytes_ += static_cast<int64_t>(xs.nbytes() + ys.nbytes());
  }
  p.busy = true;
  p.unit = unit;
  p.backup = unitCopies_[unit] > 0;
  if (p.backup) ++backups_;
  ++unitCopies_[unit];
  unitSent_[unit] = Clock::now();
}

bool SandblasterCoordinator::collect(int w) {
  Peer& p = *peers_[w];
  if (!p.busy || !p.answerHead->test() || (p.answerGrad && !p.answerGrad->test())) return false;
  p.answerHead->wait();  // rethrows a failed receive
  if (p.answerGrad) p.answerGrad->wait();
  const Answer answer = decodeAnswer(p.answer, w);
  const auto unit = static_cast<size_t>(answer.unit);  // in [0, kMaxUnits)
  if (answer.evaluation == evaluation_ && unit < unitDone_.size() && !unitDone_[unit]) {
    // The first answer wins: its buffer becomes the unit's, and the worker's
    // next answer lands in the unit's old one (empty on the first evaluation).
    std::swap(unitGrad_[unit], p.grad);
    p.grad.resize(params_);
    unitLoss_[unit] = answer.loss;
    unitDone_[unit] = 1;
    ++unitsByWorker_[w];
    if (p.backup) ++backupsWon_;
  } else {
    ++answersDropped_;  // a slower copy of a unit already answered
  }
  p.busy = false;
  p.unit = -1;
  postAnswer(w);
  return true;
}

double SandblasterCoordinator::forwardBackward(nn::Module& model, const StepWork& work) {
  DTRAIN_CHECK(!peers_.empty(), "sandblaster: forwardBackward before setup");
  x_ = work.x.isContiguous() ? work.x : work.x.clone();
  y_ = work.y.isContiguous() ? work.y : work.y.clone();
  DTRAIN_CHECK(!o_.workersRead || (work.step >= 0 && work.epoch >= 0),
               "sandblaster: workers read their samples by step, and this batch has none "
               "(use --sandblaster-data coordinator)");
  batchEpoch_ = work.epoch;
  batchStep_ = work.step;
  stepLoss_ = evaluate(&model);
  return stepLoss_;
}

double SandblasterCoordinator::evaluate(nn::Module* model) {
  ++evaluation_;
  ++evaluations_;
  if (!shards_) {
    // This evaluation's parameters, sent once to each worker that takes a unit.
    auto flat = std::make_shared<std::vector<float>>();
    flat->reserve(params_);
    for (auto& [name, v] : model->namedParameters()) {
      const Tensor& d = v.data();
      DTRAIN_CHECK(d.dtype() == DType::F32 && d.isContiguous(), "sandblaster: parameter ", name,
                   " must be a contiguous F32 tensor");
      flat->insert(flat->end(), d.data<float>(), d.data<float>() + d.numel());
    }
    paramsNow_ = std::move(flat);
  }
  const int64_t n = x_.shape()[0];
  const int units = static_cast<int>(std::min<int64_t>(o_.workUnits, n));
  unitStart_.resize(units + 1);
  for (int u = 0; u <= units; ++u) unitStart_[u] = n * u / units;
  unitGrad_.resize(units);
  unitLoss_.assign(units, 0.0);
  unitDone_.assign(units, 0);
  unitCopies_.assign(units, 0);
  unitSent_.assign(units, Clock::time_point{});
  if (shards_) shards_->beginEvaluation(evaluation_, units, n);

  int next = 0, done = 0;
  PollBackoff backoff;
  while (done < units) {
    // Hand units to free workers: new ones first, then backup copies of the
    // oldest pending ones (each at most twice out).
    for (int w = 0; w < workers_; ++w) {
      if (peers_[w]->busy) continue;
      if (next < units) {
        assign(w, next++);
      } else if (o_.backups) {
        int oldest = -1;
        for (int u = 0; u < units; ++u)
          if (!unitDone_[u] && unitCopies_[u] == 1 &&
              (oldest < 0 || unitSent_[u] < unitSent_[oldest]))
            oldest = u;
        if (oldest >= 0) assign(w, oldest);
      }
    }
    bool progressed = false;
    for (int w = 0; w < workers_; ++w) progressed |= collect(w);
    if (progressed) {  // an answer arrived (a dropped copy frees its worker too)
      done = static_cast<int>(std::count(unitDone_.begin(), unitDone_.end(), 1));
      backoff.progressed();
    } else {
      backoff.nothingArrived();  // the workers need the cores
    }
  }

  // The batch gradient and loss: unit means weighted by their samples, summed
  // in unit order (sharded: each shard sums its slice).
  double loss = 0;
  for (int u = 0; u < units; ++u) {
    const float share = static_cast<float>(unitStart_[u + 1] - unitStart_[u]) / static_cast<float>(n);
    loss += static_cast<double>(share) * unitLoss_[u];
  }
  if (shards_) {
    shards_->endEvaluation(evaluation_);
    return loss;
  }
  std::vector<float> sum(params_, 0.0f);
  for (int u = 0; u < units; ++u) {
    const float share = static_cast<float>(unitStart_[u + 1] - unitStart_[u]) / static_cast<float>(n);
    const std::vector<float>& g = unitGrad_[u];
    for (int64_t j = 0; j < params_; ++j) sum[j] += share * g[j];
  }
  int64_t off = 0;
  for (auto& [name, v] : model->namedParameters()) {
    if (!v.grad().defined()) v.zeroGrad();
    Tensor& g = v.grad();
    std::memcpy(g.data<float>(), sum.data() + off, sizeof(float) * g.numel());
    off += g.numel();
  }
  return loss;
}

void SandblasterCoordinator::applyUpdate(optim::Optimizer& optimizer) {
  if (!shards_) return optimizer.step();
  optimizer.setStepCount(optimizer.stepCount() + 1);
  shards_->step(lbfgs_->options(), stepLoss_, [this] { return evaluate(nullptr); });
}

void SandblasterCoordinator::syncModel(nn::Module& model, optim::Optimizer* optimizer) {
  if (!shards_ || finished_) return;  // finish() gathered the final state
  shards_->gatherParameters(model);
  gatherBytes_ += params_ * static_cast<int64_t>(sizeof(float));
  if (optimizer) {
    const auto history = shards_->gatherHistory();
    for (const auto& [key, t] : history) gatherBytes_ += t.nbytes();
    lbfgs_->setGlobalState(history);
  }
}

void SandblasterCoordinator::finish(nn::Module& model, optim::Optimizer& optimizer) {
  if (finished_) return;
  // Sharded: the final parameters and history before the shards stop.
  syncModel(model, &optimizer);
  finished_ = true;
  // Backup copies still computing answer first; then every worker is told the run is over.
  for (int w = 0; w < workers_; ++w) {
    Peer& p = *peers_[w];
    if (p.busy) {
      waitLong(*p.answerHead);
      if (p.answerGrad) waitLong(*p.answerGrad);
      ++answersDropped_;
      p.busy = false;
    } else {
      p.answerHead->cancelIfPending();
      if (p.answerGrad) p.answerGrad->cancelIfPending();
    }
    for (auto& s : p.sends) s->wait();
    p.sends.clear();
    std::fill(p.header.begin(), p.header.end(), 0);
    p.header[kKind] = kDone;
    comm_.isend(p.header.data(), p.header.size(), DType::I64, workerRank(w), kUnitTag)->wait();
  }
  if (shards_) shards_->done();
}

std::map<std::string, double> SandblasterCoordinator::stats() const {
  return {{"sandblaster_gradient_evaluations", static_cast<double>(evaluations_)},
          {"sandblaster_backups", static_cast<double>(backups_)},
          {"sandblaster_backups_won", static_cast<double>(backupsWon_)}};
}

nlohmann::json SandblasterCoordinator::report() const {
  nlohmann::json j = {{"sandblaster_units_per_worker", unitsByWorker_},
                      {"sandblaster_work_units", o_.workUnits},
                      {"sandblaster_answers_dropped", answersDropped_}};
  // What the coordinator moved besides the samples it hands out and the
  // parameters gathered for evaluations and checkpoints: with shards, only
  // commands, scalars and unit headers.
  const int64_t total = static_cast<int64_t>(comm_.bytesSent() + comm_.bytesReceived());
  j["sandblaster_coordinator_bytes"] = total;
  j["sandblaster_coordinator_sample_bytes"] = sampleBytes_;
  j["sandblaster_coordinator_gather_bytes"] = gatherBytes_;
  j["sandblaster_coordinator_other_bytes_per_evaluation"] =
      evaluations_ ? static_cast<double>(total - sampleBytes_ - gatherBytes_) / static_cast<double>(evaluations_) : 0.0;
  if (shards_) j["sandblaster_shard_commands"] = shards_->commands();
  return j;
}

WorkerStats runSandblasterWorker(
    comm::Communicator& comm, nn::Module& model,
    const std::function<autograd::Variable(const autograd::Variable&, const Tensor&)>& lossFromOutput,
    const SandblasterOptions& o, const BatchReader& readBatch) {
  WorkerStats stats;
  std::vector<std::pair<std::string, autograd::Variable>> named;
  const std::vector<autograd::Variable*> params = sandblasterParams(model, named);
  int64_t count = 0;
  for (auto* v : params) count += v->numel();
  std::vector<float> flat(count), grad(count);
  std::vector<int64_t> header(kHeaderSize);
  const int rank = comm.rank();
  // Sharded: the slices of the parameters each shard holds, and what goes to it.
  const int servers = o.servers;
  std::vector<std::pair<int64_t, int64_t>> slices;
  for (int s = 0; s < servers; ++s) slices.push_back(shard::sliceOf(count, servers, s));
  double pull = 0, gradHead[2] = {0, 0};
  std::vector<comm::WorkPtr> toShards;
  const double fixedMs = o.stragglerMs.count(rank) ? o.stragglerMs.at(rank) : 0.0;
  Rng rng(o.seed * 1000003 + 17 + rank);
  comm::WorkPtr answerHead, answerGrad;
  AnswerHead answer{};
  for (;;) {
    waitLong(*comm.irecv(header.data(), header.size(), DType::I64, 0, kUnitTag));
    const UnitHeader unitHead = decodeUnitHeader(header.data(), servers);
    if (unitHead.kind == kDone) break;
    if (unitHead.params != kNoParams) {
      if (unitHead.params == kFromShards) {  // ask each shard for its slice
        pull = static_cast<double>(unitHead.evaluation);
        std::vector<comm::WorkPtr> works;
        for (int s = 0; s < servers; ++s) {
          const auto [lo, hi] = slices[s];
          works.push_back(comm.isend(&pull, sizeof pull, DType::U8, 1 + s, shard::kPullTag));
          works.push_back(comm.irecv(flat.data() + lo, static_cast<size_t>(hi - lo), DType::F32, 1 + s,
                                     shard::kParamsSliceTag));
        }
        for (auto& w : works) waitLong(*w);
      } else {
        waitLong(*comm.irecv(flat.data(), flat.size(), DType::F32, 0, kParamsTag));
      }
      int64_t off = 0;
      for (auto* v : params) {
        std::memcpy(v->data().data<float>(), flat.data() + off, sizeof(float) * v->numel());
        off += v->numel();
      }
    }
    Tensor x, y;
    if (unitHead.workerReads) {
      DTRAIN_CHECK(readBatch, "sandblaster: worker ", rank, " has no data to read its units from");
      const data::Batch& b = readBatch(unitHead.epoch, unitHead.step);
      DTRAIN_CHECK(b.size() == unitHead.batch, "sandblaster: worker ", rank, " read ", b.size(),
                   " samples for step ", unitHead.step + 1, " where the coordinator has ",
                   unitHead.batch, " (the workers' data differs from the coordinator's; "
                   "--sandblaster-data coordinator sends the samples)");
      x = b.x.slice(0, unitHead.lo, unitHead.hi).contiguous();
      y = b.y.slice(0, unitHead.lo, unitHead.hi).contiguous();
    } else {
      x = emptyFromMeta(unitHead.x);
      y = emptyFromMeta(unitHead.y);
      waitLong(*comm.irecv(x.rawData(), x.nbytes(), DType::U8, 0, kXTag));
      waitLong(*comm.irecv(y.rawData(), y.nbytes(), DType::U8, 0, kYTag));
    }
    model.zeroGrad();
    autograd::Variable loss = lossFromOutput(model.forward(autograd::Variable(x)), y);
    const double lossValue = loss.item();
    loss.backward();
    double ms = fixedMs;
    if (o.randomDelayMs > 0) ms += -o.randomDelayMs * std::log(1.0 - rng.uniform());
    if (ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1e3)));
    // The previous answer is long received (the coordinator sent this unit after
    // it; the shards always have a receive posted for this worker).
    if (answerHead) answerHead->wait();
    if (answerGrad) answerGrad->wait();
    for (auto& w : toShards) waitLong(*w);
    toShards.clear();
    int64_t off = 0;
    for (auto* v : params) {
      const Tensor& g = v->grad();
      if (g.defined())
        std::memcpy(grad.data() + off, g.data<float>(), sizeof(float) * v->numel());
      else
        std::fill(grad.begin() + off, grad.begin() + off + v->numel(), 0.0f);
      off += v->numel();
    }
    answer = {static_cast<double>(unitHead.evaluation), static_cast<double>(unitHead.unit), lossValue};
    if (servers > 0) {  // the gradient to the shards, the loss to the coordinator
      gradHead[0] = answer.evaluation;
      gradHead[1] = answer.unit;
      for (int s = 0; s < servers; ++s) {
        const auto [lo, hi] = slices[s];
        toShards.push_back(comm.isend(gradHead, sizeof gradHead, DType::U8, 1 + s, shard::kGradHeadTag));
        toShards.push_back(comm.isend(grad.data() + lo, static_cast<size_t>(hi - lo), DType::F32, 1 + s,
                                      shard::kGradSliceTag));
      }
    } else {
      answerGrad = comm.isend(grad.data(), grad.size(), DType::F32, 0, kAnswerGradTag);
    }
    answerHead = comm.isend(&answer, sizeof(answer), DType::U8, 0, kAnswerHeadTag);
    ++stats.units;
  }
  if (answerHead) answerHead->wait();
  if (answerGrad) answerGrad->wait();
  for (auto& w : toShards) waitLong(*w);
  // Goodbye to each shard (evaluation -1): it stops once every worker said it.
  gradHead[0] = gradHead[1] = -1;
  for (int s = 0; s < servers; ++s) {
    const auto [lo, hi] = slices[s];
    waitLong(*comm.isend(gradHead, sizeof gradHead, DType::U8, 1 + s, shard::kGradHeadTag));
    waitLong(*comm.isend(grad.data() + lo, static_cast<size_t>(hi - lo), DType::F32, 1 + s, shard::kGradSliceTag));
  }
  return stats;
}

}  // namespace dtrain::parallel::sandblaster
