#include "parallel/ps/Worker.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>

#include "core/Error.h"
#include "parallel/ps/OptimizerState.h"
#include "core/Log.h"
#include "core/Timer.h"
#include "nn/Lora.h"

namespace dtrain::parallel::ps {

using dtrain::detail::concat;

PsWorker::PsWorker(comm::Communicator& comm, PsOptions options)
    : comm_(comm), opts_(std::move(options)), worker_(comm.rank() - opts_.servers) {
  DTRAIN_CHECK(comm.size() == opts_.servers + opts_.workers, "parameter server: ", comm.size(),
               " ranks for ", opts_.servers, " servers and ", opts_.workers, " workers");
  DTRAIN_CHECK(worker_ >= 0, "rank ", comm.rank(), " is a server, not a worker");
}

PsWorker::~PsWorker() {
  for (auto* works : {&pushWork_, &ctrlWork_})
    for (auto& w : *works)
      if (w) w->cancelIfPending();
}

bool PsWorker::ownsProcess() const { return std::string(comm_.backend()) != "local"; }

std::string PsWorker::serverName(int s) const { return concat("parameter server ", s, " (rank ", s, ")"); }

std::vector<float*> PsWorker::paramPtrs() {
  std::vector<float*> out;
  for (auto& p : params_) out.push_back(p.data().data<float>());
  return out;
}

void PsWorker::setup(nn::Module& model, optim::Optimizer& optimizer) {
  DTRAIN_CHECK(params_.empty(), "PsWorker::setup called twice");
  std::vector<int64_t> sizes;
  // The trained parameters only (LoRA's frozen base is every worker's own,
  // identical copy: built from the same seed and --load).
  for (auto& [name, v] : nn::trainableParameters(model)) {
    params_.push_back(v);
    sizes.push_back(v.data().numel());
  }
  plan_ = planShards(sizes, opts_.servers);
  const int S = opts_.servers;
  pushBuf_.resize(S);
  ctrlBuf_.resize(S);
  replyBuf_.resize(S);
  pushWork_.resize(S);
  ctrlWork_.resize(S);
  sent_.assign(S, 0);
  version_.assign(S, 0);
  accumVersion_.assign(S, 0);
  for (int s = 0; s < S; ++s) {
    const int64_t n = plan_.shardSize(s);
    pushBuf_[s].assign(kHeaderFloats + n, 0.0f);
    ctrlBuf_[s].assign(kHeaderFloats, 0.0f);
    replyBuf_[s].assign(kHeaderFloats + n, 0.0f);
  }
  for (int s = 0; s < S; ++s) codecs_.push_back(PushCodec::make(opts_, plan_, s));
  codedBuf_.resize(S);
  for (int s = 0; s < S; ++s)
    if (codecs_[s]) codedBuf_[s].assign(codecs_[s]->messageFloats(), 0.0f);
  // Collective over the job (the servers split in run()): beats travel on a
  // communicator of their own, driven by a thread of their own.
  std::vector<int> serverRanks(S);
  std::iota(serverRanks.begin(), serverRanks.end(), 0);
  hb_ = std::make_unique<Heartbeat>(comm_.split(0, comm_.rank()), serverRanks, opts_.timeoutS);
  // Worker 0's parameters (and optimizer state, after --load) seed the
  // servers, as rank 0's do under allreduce; then every worker fetches them.
  if (worker_ == 0) sendInit(optimizer);
  for (int s = 0; s < S; ++s) sendCtrl(s, Kind::Pull, 0);
  receiveParams();
}

void PsWorker::sendInit(optim::Optimizer& optimizer) {
  const bool hasState = optimizer.size() > 0 && optimizer.hasState(0);
  const auto slots = hasState ? static_cast<int32_t>(optimizer.slotNames().size()) : 0;
  std::vector<ParamState> st = hasState ? paramStates(optimizer) : std::vector<ParamState>{};
  std::vector<const float*> src;
  for (auto& p : params_) src.push_back(p.data().data<float>());
  for (int s = 0; s < opts_.servers; ++s) {
    const int64_t n = plan_.shardSize(s);
    std::vector<float> buf(kHeaderFloats + n);
    Header h;
    h.kind = Kind::Init;
    h.total = plan_.total;
    h.version = optimizer.stepCount();
    h.optSteps = hasState ? *st[0].step->data<int64_t>() : 0;
    h.slots = hasState && slots > 0 ? slots : 0;
    writeHeader(buf.data(), h);
    gatherShard(plan_, s, src, buf.data() + kHeaderFloats);
    waitServer(*comm_.isend(buf.data(), buf.size(), DType::F32, s, kInitTag), s,
               "take worker 0's parameters");
    if (h.slots == 0) continue;
    std::vector<float> state(static_cast<size_t>(slots) * n);
    for (int32_t k = 0; k < slots; ++k) {
      std::vector<const float*> slot;
      for (auto& ps : st) slot.push_back(ps.slots[k]->data<float>());
      gatherShard(plan_, s, slot, state.data() + k * n);
    }
    waitServer(*comm_.isend(state.data(), state.size(), DType::F32, s, kInitTag), s,
               "take worker 0's optimizer state");
  }
}

void PsWorker::scaleGradients(nn::Module& model, float coef) {
  if (opts_.consistency != Consistency::Sync) Strategy::scaleGradients(model, coef);
}

void PsWorker::stageGradients() {
  std::vector<const float*> grads;
  for (auto& p : params_) grads.push_back(p.grad().data<float>());
  for (int s = 0; s < opts_.servers; ++s) {
    // Gradients go straight into the push buffer (the first step of a push
    // copies, later ones add), once the previous push from it has left.
    float* payload = pushBuf_[s].data() + kHeaderFloats;
    if (accumulated_ == 0) {
      if (pushWork_[s]) {
        Timer t;
        waitServer(*pushWork_[s], s, "take the push");
        waitS_ += t.seconds();
      }
      accumVersion_[s] = version_[s];
      gatherShard(plan_, s, grads, payload);
    } else {
      addToShard(plan_, s, grads, payload);
    }
  }
  ++accumulated_;
}

void PsWorker::push(int s, int32_t flags, double lr) {
  Header h;
  h.kind = Kind::Push;
  h.worker = worker_;
  h.step = step_;
  h.seq = sent_[s]++;
  h.version = accumVersion_[s];  // the oldest parameters among the accumulated steps
  h.lr = lr;
  h.flags = flags;
  std::vector<float>& msg = codecs_[s] ? codedBuf_[s] : pushBuf_[s];
  if (codecs_[s]) codecs_[s]->encode(pushBuf_[s].data() + kHeaderFloats, msg.data(), step_, worker_);
  writeHeader(msg.data(), h);
  pushWork_[s] = comm_.isend(msg.data(), msg.size(), DType::F32, s, kPushTag);
  bytesSent_ += static_cast<double>(msg.size() * sizeof(float));
}

void PsWorker::sendCtrl(int s, Kind kind, int64_t step) {
  if (ctrlWork_[s]) waitServer(*ctrlWork_[s], s, "take a control message");
  Header h;
  h.kind = kind;
  h.worker = worker_;
  h.step = step;
  h.seq = sent_[s];
  h.waitS = waitS_;
  if (const memory::Domain* d = memory::currentDomain(); d && kind == Kind::Done)
    h.memory = memory::snapshot(*d).toArray();
  writeHeader(ctrlBuf_[s].data(), h);
  ctrlWork_[s] = comm_.isend(ctrlBuf_[s].data(), ctrlBuf_[s].size(), DType::F32, s, kCtrlTag);
  bytesSent_ += static_cast<double>(ctrlBuf_[s].size() * sizeof(float));
}

void PsWorker::receiveParams() {
  Timer t;
  std::vector<comm::WorkPtr> works(opts_.servers);
  for (int s = 0; s < opts_.servers; ++s)
    works[s] = comm_.irecv(replyBuf_[s].data(), replyBuf_[s].size(), DType::F32, s, kReplyTag);
  auto ptrs = paramPtrs();
  int64_t minClock = std::numeric_limits<int64_t>::max();
  for (int s = 0; s < opts_.servers; ++s) {
    try {
      waitServer(*works[s], s, "answer the fetch");
    } catch (...) {
      for (auto& w : works) w->cancelIfPending();
      throw;
    }
    const Header h = decodeHeader(replyBuf_[s].data(), {Kind::Params}, serverName(s));
    scatterShard(plan_, s, replyBuf_[s].data() + kHeaderFloats, ptrs);
    version_[s] = h.version;
    minClock = std::min(minClock, h.minClock);
    if (h.flags & kFinished) finished_ = true;
  }
  cachedMinClock_ = minClock;
  fresh_ = true;
  ++fetches_;
  waitS_ += t.seconds();
}

void PsWorker::waitServer(comm::Work& work, int s, const char* what) {
  // A live server may keep a worker waiting as long as it must (ssp holds a
  // fetch until the slowest worker catches up): only its silence counts.
  const auto slice = seconds(Heartbeat::intervalFor(opts_.timeoutS));
  while (!work.waitFor(slice)) {
    const double silent = hb_->silentFor(s);
    if (silent > opts_.timeoutS) {
      work.cancelIfPending();  // its buffer may go with the exception
      throw Error(concat(serverName(s), " did not ", what, " of worker ", worker_, " at step ",
                         step_, " and sent nothing for ", silent,
                         " s, not even a heartbeat (--ps-timeout ", opts_.timeoutS,
                         "): the server died or hangs"));
    }
  }
}

bool PsWorker::declaredDead() {
  bool any = false;
  for (int s = 0; s < opts_.servers; ++s) any |= (hb_->takeNotices(s) & kNoticeDeclaredDead) != 0;
  return any;
}

bool PsWorker::runOver() const {
  for (int s = 0; s < opts_.servers; ++s)
    if (hb_->noticesFrom(s) & kNoticeRunOver) return true;
  return false;
}

void PsWorker::applyUpdate(optim::Optimizer& optimizer) {
  stageGradients();
  ++steps_;
  const int64_t next = step_ + 1;  // the step the next fetch serves
  // sync applies the mean of W gradients per step; async and ssp apply each
  // push on its own, so each is scaled by 1/W: W pushes then move the
  // parameters as far as one synchronous step, and one --lr trains comparably
  // in every mode (unscaled, SGD momentum 0.9 at the default lr diverges with 4
  // workers: every update is W times too large and stale on top).
  const double lr = opts_.consistency == Consistency::Sync ? optimizer.lr()
                                                            : optimizer.lr() / opts_.workers;
  fresh_ = false;
  bool pushNow = true, fetchNow = true;
  switch (opts_.consistency) {
    case Consistency::Sync:
      break;
    case Consistency::Async:
      pushNow = next % opts_.pushEvery == 0;
      fetchNow = next % opts_.fetchEvery == 0;
      break;
    case Consistency::Ssp:
      // Cached parameters hold every update of clocks < cachedMinClock_; step
      // `next` may use them while that is at least next - s (lazy reads stop
      // there). Eager reads also refresh every --fetch-every steps: lazy reads
      // train on parameters up to s steps of every worker stale even when
      // nobody lags (Dai et al. 2015).
      fetchNow = cachedMinClock_ < next - opts_.staleness ||
                 (opts_.sspEagerReads && next % opts_.fetchEvery == 0);
      break;
  }
  // ssp fetches separately, after the push: the server holds that answer back
  // until the slowest worker is close enough; a push is never held back.
  const bool combined = fetchNow && opts_.consistency != Consistency::Ssp;
  if (pushNow) {
    for (int s = 0; s < opts_.servers; ++s) push(s, combined ? kWantParams : 0, lr);
    accumulated_ = 0;
    ++pushes_;
  }
  if (fetchNow && !(pushNow && combined))
    for (int s = 0; s < opts_.servers; ++s) sendCtrl(s, Kind::Pull, next);
  // Mid-step, so that the servers owe this worker a reply while it is silent.
  if (step_ == opts_.pauseAt) pauseUntilDeclaredDead();
  if (fetchNow) receiveParams();
  if (declaredDead()) {
    // A server took this worker for dead (it was silent past --ps-timeout)
    // and re-admits it with this step's messages: what it holds may be far
    // behind, so it reads the current parameters before its next step.
    log::warn("worker ", worker_, " (rank ", comm_.rank(),
              "): a parameter server declared this worker dead; it rejoins at step ", next,
              " with fresh parameters");
    for (int s = 0; s < opts_.servers; ++s) sendCtrl(s, Kind::Pull, next);
    receiveParams();
  }
  readStalenessMax_ = std::max(readStalenessMax_, next - cachedMinClock_);
}

bool PsWorker::stopBefore(int64_t step) {
  if (finished_) return true;
  if (opts_.killAt >= 0 && step == opts_.killAt) {
    log::warn("worker ", worker_, " (rank ", comm_.rank(), "): --kill-worker: stops answering at step ",
              step);
    dead_ = true;
    hb_->setSending(false);
    return true;
  }
  if (runOver()) {
    // Only a worker declared dead can still be training when the run ends.
    log::warn("worker ", worker_, " (rank ", comm_.rank(),
              "): the parameter servers ended the run while this worker was declared dead; it stops at step ",
              step);
    finished_ = true;
    return true;
  }
  return false;
}

void PsWorker::pauseUntilDeclaredDead() {
  log::warn("worker ", worker_, " (rank ", comm_.rank(), "): --pause-worker: silent after its push of step ",
            step_, " until every server has declared it dead");
  hb_->setSending(false);
  std::vector<bool> told(opts_.servers, false);
  waitForServers(
      [&] {
        bool all = true;
        for (int s = 0; s < opts_.servers; ++s) {
          const int64_t n = hb_->noticesFrom(s);
          told[s] = told[s] || (n & kNoticeDeclaredDead);
          all = all && (told[s] || (n & kNoticeRunOver));
        }
        return all;
      });
  hb_->setSending(true);
}

void PsWorker::waitForServers(const std::function<bool()>& pred) {
  // A receive nobody sends to: it fails when the job is aborted (another rank
  // failed), which the heartbeats alone would not notice.
  int32_t never = 0;
  auto probe = comm_.irecv(&never, 1, DType::I32, 0, kNeverTag);
  const auto slice = std::chrono::milliseconds(
      static_cast<int64_t>(1000 * Heartbeat::intervalFor(opts_.timeoutS)) + 1);
  try {
    while (!hb_->waitUntil(pred, slice)) probe->test();
  } catch (...) {
    probe->cancelIfPending();
    throw;
  }
  probe->cancelIfPending();
}

void PsWorker::syncModel(nn::Module& model, optim::Optimizer* optimizer) {
  if (!finalHeader_.empty()) {
    if (!optimizer) return;
    // The servers' optimizer state, for the checkpoint.
    const int32_t slots = finalHeader_[0].slots;
    DTRAIN_CHECK(slots == 0 || slots == static_cast<int32_t>(optimizer->slotNames().size()),
                 "parameter servers sent ", slots, " optimizer state arrays, ",
                 optimizer->name(), " has ", optimizer->slotNames().size());
    optimizer->ensureState();
    auto st = paramStates(*optimizer);
    for (int s = 0; s < opts_.servers; ++s) {
      for (const ShardSlice& sl : plan_.slices[s]) {
        *st[sl.param].step->data<int64_t>() = finalHeader_[s].optSteps;
        for (int32_t k = 0; k < slots; ++k)
          std::memcpy(st[sl.param].slots[k]->data<float>() + sl.offset,
                      finalPayload_[s].data() + (1 + k) * plan_.shardSize(s) + sl.shardOffset,
                      sl.length * sizeof(float));
      }
    }
    optimizer->setStepCount(finalHeader_[0].version);
    return;
  }
  if (fresh_) return;
  for (int s = 0; s < opts_.servers; ++s) sendCtrl(s, Kind::Pull, step_);
  receiveParams();
}

void PsWorker::finish(nn::Module& model, optim::Optimizer& optimizer) {
  if (dead_) return playDead();
  if (finished_ && runOver()) return hb_->stop();  // nobody listens any more
  // Gradients accumulated since the last push (async --push-every) still count.
  if (accumulated_ > 0) {
    const double lr = opts_.consistency == Consistency::Sync ? optimizer.lr()
                                                              : optimizer.lr() / opts_.workers;
    for (int s = 0; s < opts_.servers; ++s) push(s, 0, lr);
    accumulated_ = 0;
  }
  for (int s = 0; s < opts_.servers; ++s) sendCtrl(s, Kind::Done, step_);
  for (int s = 0; s < opts_.servers; ++s) {
    if (pushWork_[s]) waitServer(*pushWork_[s], s, "take the last push");
    waitServer(*ctrlWork_[s], s, "take the end-of-run message");
  }
  if (worker_ == 0) receiveFinal();
  hb_->stop();
}

void PsWorker::receiveFinal() {
  auto ptrs = paramPtrs();
  finalHeader_.resize(opts_.servers);
  finalPayload_.resize(opts_.servers);
  serverStats_.resize(opts_.servers);
  auto receive = [&](void* data, size_t count, DType dtype, int s) {
    waitServer(*comm_.irecv(data, count, dtype, s, kFinalTag), s, "send the final state");
  };
  for (int s = 0; s < opts_.servers; ++s) {
    // Other workers may still train for long: the servers' heartbeats say they live.
    std::vector<float> head(kHeaderFloats);
    receive(head.data(), head.size(), DType::F32, s);
    // Sizes from a peer are checked before they size a buffer: a corrupt
    // header is one line, not a huge allocation (tests/fuzz: FuzzPsMessages).
    const Header h = decodeHeader(head.data(), {Kind::Final}, serverName(s));
    // syncModel reads every server's payload with server 0's count of slots.
    DTRAIN_CHECK(s == 0 || h.slots == finalHeader_[0].slots, serverName(s), " sent ", h.slots,
                 " optimizer state arrays, parameter server 0 sent ", finalHeader_[0].slots);
    const int64_t n = plan_.shardSize(s);
    finalHeader_[s] = h;
    finalPayload_[s].resize(static_cast<size_t>(1 + h.slots) * n);
    receive(finalPayload_[s].data(), finalPayload_[s].size(), DType::F32, s);
    std::string json(static_cast<size_t>(h.extra), '\0');
    receive(json.data(), json.size(), DType::U8, s);
    serverStats_[s] = ServerStats::fromJson(nlohmann::json::parse(json), opts_.workers);
    scatterShard(plan_, s, finalPayload_[s].data(), ptrs);
  }
  fresh_ = true;
}

void PsWorker::playDead() {
  // Fault injection: silent (no heartbeats either) until the servers have
  // finished; under mpirun a process that exits early would end the whole job.
  hb_->setSending(false);
  waitForServers([&] { return runOver(); });
  hb_->stop();
}

std::map<std::string, double> PsWorker::stats() const {
  const double n = static_cast<double>(std::max<int64_t>(1, steps_));
  std::map<std::string, double> out{{"wait_ms", waitS_ / n * 1e3},
                                    {"pushes", static_cast<double>(pushes_)},
                                    {"fetches", static_cast<double>(fetches_)},
                                    {"bytes_sent_per_worker", bytesSent_ / n}};
  // Only ssp reads by a clock bound; elsewhere the figure would mean nothing.
  if (opts_.consistency == Consistency::Ssp)
    out["read_staleness_max"] = static_cast<double>(readStalenessMax_);
  return out;
}

std::vector<memory::RankMemory> PsWorker::gatherMemory(const memory::RankMemory& mine) {
  if (serverStats_.empty()) return {mine};
  std::vector<memory::RankMemory> ranks(opts_.servers + opts_.workers);
  for (int s = 0; s < opts_.servers; ++s) ranks[s] = serverStats_[s].memory;
  for (int w = 0; w < opts_.workers; ++w)
    ranks[opts_.workerRank(w)] = w == 0 ? mine : serverStats_[0].workerMemory[w];
  return ranks;
}

nlohmann::json PsWorker::report() const {
  if (serverStats_.empty()) return nlohmann::json::object();
  nlohmann::json j;
  j["servers"] = opts_.servers;
  j["consistency"] = consistencyName(opts_.consistency);
  std::vector<int64_t> updates, pushes, in, out;
  std::vector<double> rate;
  int64_t maxAhead = 0;
  std::vector<int> dead, readmitted;
  for (const ServerStats& s : serverStats_) {
    updates.push_back(s.updates);
    pushes.push_back(s.pushes);
    in.push_back(s.bytesIn);
    out.push_back(s.bytesOut);
    rate.push_back(s.seconds > 0 ? s.updates / s.seconds : 0.0);
    maxAhead = std::max(maxAhead, s.sspMaxAhead);
    // Each worker once, in the order the servers saw them.
    for (auto [from, to] : {std::pair{&s.deadWorkers, &dead}, {&s.readmittedWorkers, &readmitted}})
      for (int w : *from)
        if (std::find(to->begin(), to->end(), w) == to->end()) to->push_back(w);
  }
  j["server_updates"] = updates;
  j["server_pushes"] = pushes;
  j["server_bytes_in"] = in;
  j["server_bytes_out"] = out;
  j["server_updates_per_s"] = rate;
  // Every push reaches every server: server 0's view of staleness and drops is
  // the whole run's (without counting each push S times).
  const ServerStats& s0 = serverStats_[0];
  std::vector<int64_t> hist = s0.staleness;
  while (hist.size() > 1 && hist.back() == 0) hist.pop_back();
  j["staleness_histogram"] = hist;
  double sum = 0, count = 0;
  for (size_t k = 0; k < s0.staleness.size(); ++k) {
    sum += static_cast<double>(k) * s0.staleness[k];
    count += s0.staleness[k];
  }
  j["staleness_mean"] = count > 0 ? sum / count : 0.0;
  std::vector<double> wait = s0.workerWaitS;
  wait[0] = waitS_;
  j["worker_wait_s"] = wait;
  j["dropped_gradients"] = s0.dropped;
  if (opts_.consistency == Consistency::Ssp) j["ssp_max_ahead"] = maxAhead;
  j["dead_workers"] = dead;
  j["readmitted_workers"] = readmitted;
  return j;
}

}  // namespace dtrain::parallel::ps
