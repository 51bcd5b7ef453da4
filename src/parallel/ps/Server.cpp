#include "parallel/ps/Server.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "core/Error.h"
#include "parallel/ps/OptimizerState.h"
#include "core/Log.h"
#include "core/Memory.h"
#include "nn/Lora.h"
#include "optim/Factory.h"

namespace dtrain::parallel::ps {

using dtrain::detail::concat;
using Clock = std::chrono::steady_clock;

ParameterServer::ParameterServer(comm::Communicator& comm, const nn::Module& model,
                                 PsOptions options)
    : comm_(comm), opts_(std::move(options)), server_(comm.rank()) {
  DTRAIN_CHECK(comm.size() == opts_.servers + opts_.workers, "parameter server: ", comm.size(),
               " ranks for ", opts_.servers, " servers and ", opts_.workers, " workers");
  DTRAIN_CHECK(server_ < opts_.servers, "rank ", server_, " is not a server");
  // The trained parameters only (LoRA's frozen base stays on the workers).
  auto named = nn::trainableParameters(model);
  std::vector<int64_t> sizes;
  for (auto& [name, v] : named) sizes.push_back(v.data().numel());
  plan_ = planShards(sizes, opts_.servers);
  n_ = plan_.shardSize(server_);
  {
    memory::CategoryScope accounted(memory::Category::Parameters);  // memory_per_rank
    params_ = Tensor::zeros({n_});
  }
  {
    memory::CategoryScope accounted(memory::Category::Gradients);
    grad_ = Tensor::zeros({n_});
  }
  // The optimizer sees each slice as a parameter of its own (a view into the
  // shard): elementwise update rules give exactly the whole-tensor result.
  optim::NamedParameters slices;
  std::vector<int64_t> sourceDims;  // nanoGPT's decay groups follow the whole tensor
  for (const ShardSlice& sl : plan_.slices[server_]) {
    const auto& [name, v] = named[sl.param];
    sourceDims.push_back(v.data().dim());
    const bool whole = sl.length == v.data().numel();
    autograd::Variable var(params_.slice(0, sl.shardOffset, sl.shardOffset + sl.length), true);
    var.setGradBuffer(grad_.slice(0, sl.shardOffset, sl.shardOffset + sl.length));
    slices.emplace_back(whole ? name : concat(name, "[", sl.offset, ":", sl.offset + sl.length, "]"),
                        var);
  }
  optimizer_ = optim::makeOptimizer(opts_.optimizer, std::move(slices), opts_.optimizerOptions);
  if (opts_.optimizerOptions.decay2dOnly)
    optimizer_->setDecay2dOnly(*opts_.optimizerOptions.decay2dOnly, sourceDims);
  peers_.resize(opts_.workers);
  codec_ = PushCodec::make(opts_, plan_, server_);
  pushFloats_ = codec_ ? codec_->messageFloats() : kHeaderFloats + n_;
  for (Peer& p : peers_) {
    // Room for the message and for its decoded shard (decoded in place).
    p.pushBuf.resize(std::max(pushFloats_, kHeaderFloats + n_));
    p.ctrlBuf.resize(kHeaderFloats);
  }
  stats_.server = server_;
  stats_.workerWaitS.assign(opts_.workers, -1);
  stats_.workerMemory.assign(opts_.workers, {});
}

ParameterServer::~ParameterServer() {
  for (Peer& p : peers_)
    for (auto* w : {&p.pushWork, &p.ctrlWork})
      if (*w) (*w)->cancelIfPending();
}

std::string ParameterServer::workerName(int w) const {
  return concat("worker ", w, " (rank ", opts_.workerRank(w), ")");
}

void ParameterServer::heard(int w) {
  peers_[w].lastHeard = Clock::now();
  if (peers_[w].dead) readmit(w);
}

double ParameterServer::silence(int w) const {
  const double sinceMessage =
      std::chrono::duration<double>(Clock::now() - peers_[w].lastHeard).count();
  return std::min(sinceMessage, hb_->silentFor(w));
}

void ParameterServer::readmit(int w) {
  Peer& p = peers_[w];
  p.dead = false;
  hb_->setNotice(w, 0);
  stats_.readmittedWorkers.push_back(w);
  if (server_ == 0)
    log::warn("parameter server: ", workerName(w),
              ", declared dead, speaks again: re-admitted; it refreshes its parameters at its next step",
              opts_.consistency == Consistency::Sync
                  ? " (its pushes for steps already closed are dropped until it is back in step)"
                  : "");
}

void ParameterServer::receiveInit() {
  std::vector<float> buf(kHeaderFloats + n_);
  const auto wait = seconds(std::max(300.0, opts_.timeoutS));
  comm_.recv(buf.data(), buf.size(), DType::F32, opts_.workerRank(0), kInitTag, wait);
  const Header h = decodeHeader(buf.data(), {Kind::Init}, workerName(0));
  DTRAIN_CHECK(h.total == plan_.total, "server ", server_, ": worker 0's model has ", h.total,
               " parameters, this server's ", plan_.total,
               " (do all ranks run the same --model?)");
  std::memcpy(params_.data<float>(), buf.data() + kHeaderFloats, n_ * sizeof(float));
  optimizer_->setStepCount(h.version);
  if (h.slots > 0) {
    // Worker 0 resumed from a checkpoint: its optimizer state, slot by slot.
    DTRAIN_CHECK(h.slots == static_cast<int32_t>(optimizer_->slotNames().size()), "server ",
                 server_, ": worker 0 sent ", h.slots, " optimizer state arrays, ",
                 optimizer_->name(), " has ", optimizer_->slotNames().size());
    std::vector<float> state(static_cast<size_t>(h.slots) * n_);
    comm_.recv(state.data(), state.size(), DType::F32, opts_.workerRank(0), kInitTag, wait);
    auto st = paramStates(*optimizer_);
    const auto& sl = plan_.slices[server_];
    for (size_t i = 0; i < sl.size(); ++i) {
      *st[i].step->data<int64_t>() = h.optSteps;
      for (int32_t k = 0; k < h.slots; ++k)
        std::memcpy(st[i].slots[k]->data<float>(), state.data() + k * n_ + sl[i].shardOffset,
                    sl[i].length * sizeof(float));
    }
  }
}

void ParameterServer::postPush(int w) {
  Peer& p = peers_[w];
  p.pushWork = comm_.irecv(p.pushBuf.data(), pushFloats_, DType::F32, opts_.workerRank(w),
                           kPushTag);
}

void ParameterServer::postCtrl(int w) {
  Peer& p = peers_[w];
  p.ctrlWork = comm_.irecv(p.ctrlBuf.data(), p.ctrlBuf.size(), DType::F32, opts_.workerRank(w),
                           kCtrlTag);
}

int64_t ParameterServer::minClock() const {
  int64_t m = std::numeric_limits<int64_t>::max();
  for (const Peer& p : peers_)
    if (!p.dead) m = std::min(m, p.clock);
  return m;
}

int ParameterServer::liveWorkers() const {
  int n = 0;
  for (const Peer& p : peers_) n += !p.dead;
  return n;
}

bool ParameterServer::allFinished() const {
  for (const Peer& p : peers_)
    if (!p.done && !p.dead) return false;
  return true;
}

void ParameterServer::apply(const float* grad, double lr) {
  if (grad != grad_.data<float>()) std::memcpy(grad_.data<float>(), grad, n_ * sizeof(float));
  optimizer_->setLr(lr);
  optimizer_->step();
  ++version_;
  ++stats_.updates;
}

void ParameterServer::writeParams(std::vector<float>& buf, int32_t flags) {
  Header h;
  h.kind = Kind::Params;
  h.step = step_;
  h.version = version_;
  h.minClock = minClock();
  h.flags = flags;
  buf.resize(kHeaderFloats + n_);
  writeHeader(buf.data(), h);
  std::memcpy(buf.data() + kHeaderFloats, params_.data<float>(), n_ * sizeof(float));
}

void ParameterServer::reply(int w, int32_t flags) {
  auto buf = outbox_.buffer(kHeaderFloats + n_);
  writeParams(*buf, flags);
  outbox_.send(comm_, buf, w, opts_.workerRank(w), kReplyTag);
  stats_.bytesOut += static_cast<int64_t>(buf->size() * sizeof(float));
}

void ParameterServer::handlePush(int w) {
  Peer& p = peers_[w];
  const Header h = decodeHeader(p.pushBuf.data(), {Kind::Push}, workerName(w));
  DTRAIN_CHECK(h.worker == w, "server ", server_, ": ", workerName(w), " pushed as worker ", h.worker);
  if (codec_) codec_->decodeInPlace(p.pushBuf.data());
  const float* grad = p.pushBuf.data() + kHeaderFloats;
  ++stats_.pushes;
  stats_.bytesIn += pushFloats_ * static_cast<int64_t>(sizeof(float));
  if (opts_.consistency == Consistency::Sync) return handleSyncPush(w, h, grad);
  if (opts_.consistency == Consistency::Ssp)
    stats_.sspMaxAhead = std::max(stats_.sspMaxAhead, h.step - minClock());
  stats_.recordStaleness(version_ - h.version);
  apply(grad, h.lr);
  p.clock = h.step + 1;
  ++p.pushesDone;
  if (h.flags & kWantParams) reply(w, 0);
}

void ParameterServer::handleSyncPush(int w, const Header& h, const float* grad) {
  Peer& p = peers_[w];
  ++p.pushesDone;
  p.clock = h.step + 1;
  if (stats_.updates == 0 && accepted_ == 0) step_ = firstStep_ = h.step;  // a resumed run starts past 0
  DTRAIN_CHECK(h.step >= firstStep_, "server ", server_, ": ", workerName(w), " pushed step ", h.step,
               ", before step ", firstStep_, " where this run started");
  if (h.step < step_) {
    // Late: step h.step was closed with the first W-b gradients. The sender
    // gets the current parameters (and, once a worker finished, the order to stop).
    ++stats_.dropped;
    ++stats_.droppedPerStep[h.step - firstStep_];  // sized for every closed step
    if (h.flags & kWantParams) reply(w, kDropped | (anyDone_ ? kFinished : 0));
    return;
  }
  DTRAIN_CHECK(h.step == step_ && !p.awaitingStep, "server ", server_, ": ", workerName(w),
               " pushed step ", h.step, " while step ", step_, " is being collected");
  // Keep the message itself until the step closes (no copy): the next push
  // from this worker is received into the buffer it replaces.
  if (p.syncGrad.size() != p.pushBuf.size()) p.syncGrad.resize(p.pushBuf.size());
  std::swap(p.syncGrad, p.pushBuf);
  p.awaitingStep = true;  // accepted for this step; replied when it closes
  ++accepted_;
  stepLr_ = h.lr;
  stats_.recordStaleness(version_ - h.version);
  if (accepted_ == opts_.workers - opts_.backupWorkers)
    closeSyncStep();
  else
    foldSync(false);
}

// Sums the accepted gradients into grad_ in worker order, so the result does
// not depend on arrival order. While the step is open only the leading workers
// that have arrived are added (the work done while waiting for a straggler);
// at the close, every remaining accepted one.
void ParameterServer::foldSync(bool closing) {
  float* g = grad_.data<float>();
  for (; folded_ < opts_.workers; ++folded_) {
    Peer& p = peers_[folded_];
    if (!p.awaitingStep) {
      if (!closing) return;
      continue;
    }
    const float* src = p.syncGrad.data() + kHeaderFloats;
    if (!sumStarted_) {
      std::memcpy(g, src, n_ * sizeof(float));
      sumStarted_ = true;
    } else {
      for (int64_t i = 0; i < n_; ++i) g[i] += src[i];
    }
  }
}

void ParameterServer::closeSyncStep() {
  // The mean of the accepted gradients.
  foldSync(true);
  folded_ = 0;
  sumStarted_ = false;
  float* g = grad_.data<float>();
  if (accepted_ > 1) {
    const float scale = 1.0f / static_cast<float>(accepted_);
    for (int64_t i = 0; i < n_; ++i) g[i] *= scale;
  }
  if (opts_.clipGradNorm > 0) clipSyncGradient();
  apply(g, stepLr_);
  stats_.appliedPerStep.push_back(accepted_);
  stats_.droppedPerStep.push_back(0);  // step_'s late gradients, counted as they come
  ++step_;
  accepted_ = 0;
  // One copy of the new parameters answers every accepted worker.
  auto buf = outbox_.buffer(kHeaderFloats + n_);
  writeParams(*buf, 0);
  for (int w = 0; w < opts_.workers; ++w) {
    if (!peers_[w].awaitingStep) continue;
    peers_[w].awaitingStep = false;
    outbox_.send(comm_, buf, w, opts_.workerRank(w), kReplyTag);
    stats_.bytesOut += static_cast<int64_t>(buf->size() * sizeof(float));
  }
}

void ParameterServer::clipSyncGradient() {
  const float* g = grad_.data<float>();
  double mine = 0;
  for (int64_t i = 0; i < n_; ++i) mine += static_cast<double>(g[i]) * g[i];
  std::vector<double> norms(opts_.servers, 0.0);
  norms[server_] = mine;
  // Every server closes every step (each push reaches every server), so each
  // waits here only for the others to close the same step.
  std::vector<comm::WorkPtr> sends, recvs(opts_.servers);
  for (int s = 0; s < opts_.servers; ++s) {
    if (s == server_) continue;
    sends.push_back(comm_.isend(&mine, sizeof mine, DType::U8, s, kNormTag));
    recvs[s] = comm_.irecv(&norms[s], sizeof(double), DType::U8, s, kNormTag);
  }
  const auto limit = seconds(opts_.timeoutS);
  for (int s = 0; s < opts_.servers; ++s)
    if (recvs[s] && !recvs[s]->waitFor(limit))
      throw Error(concat("server ", server_, ": parameter server ", s, " sent no gradient norm for ",
                         "step ", step_, " within --ps-timeout ", opts_.timeoutS, " s"));
  for (auto& w : sends) w->wait();
  double total = 0;
  for (double n : norms) total += n;
  // torch's coefficient, in float (runtime/GradClip.cpp).
  const float coef = static_cast<float>(opts_.clipGradNorm / (std::sqrt(total) + 1e-6));
  if (coef >= 1.0f) return;
  float* x = grad_.data<float>();
  for (int64_t i = 0; i < n_; ++i) x[i] *= coef;
}

bool ParameterServer::serveParked(int w) {
  Peer& p = peers_[w];
  bool progressed = false;
  while (!p.parked.empty()) {
    const Header& h = p.parked.front();
    if (p.pushesDone < h.seq) break;  // its earlier pushes are still on their way
    if (h.kind == Kind::Pull) {
      if (opts_.consistency == Consistency::Ssp && minClock() < h.step - opts_.staleness) break;
      reply(w, 0);
    } else if (h.kind == Kind::Done) {
      p.done = true;
      anyDone_ = true;
      stats_.workerWaitS[w] = h.waitS;
      stats_.workerMemory[w] = memory::RankMemory::fromArray(h.memory);
    } else {
      throw Error(concat("server ", server_, ": unexpected message kind ",
                         static_cast<int>(h.kind), " from ", workerName(w)));
    }
    p.parked.pop_front();
    progressed = true;
  }
  return progressed;
}

void ParameterServer::declareDead(int w, double silentS) {
  peers_[w].dead = true;
  hb_->setNotice(w, kNoticeDeclaredDead);
  if (std::find(stats_.deadWorkers.begin(), stats_.deadWorkers.end(), w) ==
      stats_.deadWorkers.end())
    stats_.deadWorkers.push_back(w);
  const int live = liveWorkers();
  const int needed = opts_.workers - opts_.backupWorkers;
  if (opts_.consistency == Consistency::Sync && live < needed) {
    throw Error(concat(
        "parameter server ", server_, ": ", workerName(w), " sent nothing for ", silentS,
        " s, not even a heartbeat (--ps-timeout ", opts_.timeoutS,
        "): declared dead; --consistency sync",
        opts_.backupWorkers ? concat(" with --backup-workers ", opts_.backupWorkers) : "",
        " needs ", needed, " live workers and ", live, " remain",
        opts_.backupWorkers ? "" : " (--backup-workers or --consistency async/ssp go on without it)"));
  }
  if (server_ == 0)
    log::warn("parameter server: ", workerName(w), " sent nothing for ", silentS,
              " s, not even a heartbeat (--ps-timeout ", opts_.timeoutS,
              "): declared dead; training goes on with ", live, " workers");
}

void ParameterServer::checkLiveness() {
  for (int w = 0; w < opts_.workers; ++w) {
    Peer& p = peers_[w];
    if (p.done) continue;
    const double silent = silence(w);
    if (!p.dead && silent > opts_.timeoutS)
      declareDead(w, silent);
    else if (p.dead && silent < opts_.timeoutS)
      readmit(w);
  }
}

bool ParameterServer::waitForWorker(comm::Work& work, int w) {
  const auto slice = seconds(Heartbeat::intervalFor(opts_.timeoutS));
  while (!work.waitFor(slice)) {
    checkLiveness();
    // (A worker that is done is no longer declared dead, but may still die.)
    if (peers_[w].dead || silence(w) > opts_.timeoutS) return false;
  }
  return true;
}

void ParameterServer::goSilent() {
  hb_->setSending(false);
  log::warn("parameter server ", server_, ": --kill-server: stops answering after ", version_,
            " updates");
  int32_t never = 0;
  comm_.recv(&never, 1, DType::I32, opts_.workerRank(0), kNeverTag,
             comm::Millis(24LL * 3600 * 1000));
  throw Error(concat("parameter server ", server_, " was killed (--kill-server)"));
}

ServerStats ParameterServer::run() {
  // Collective over the job (the workers split in setup()): beats travel on a
  // communicator of their own, driven by a thread of their own.
  std::vector<int> workerRanks;
  for (int w = 0; w < opts_.workers; ++w) workerRanks.push_back(opts_.workerRank(w));
  hb_ = std::make_unique<Heartbeat>(comm_.split(0, comm_.rank()), workerRanks, opts_.timeoutS);
  if (opts_.killAt == 0) goSilent();
  receiveInit();
  start_ = Clock::now();
  for (int w = 0; w < opts_.workers; ++w) {
    peers_[w].lastHeard = start_;
    postPush(w);
    postCtrl(w);
  }
  int idle = 0;
  while (!allFinished()) {
    bool progressed = false;
    for (int w = 0; w < opts_.workers; ++w) {
      Peer& p = peers_[w];
      if (p.pushWork->test()) {
        p.pushWork->wait();  // rethrows a failed receive
        heard(w);
        handlePush(w);
        postPush(w);
        progressed = true;
        if (opts_.killAt > 0 && version_ >= opts_.killAt) goSilent();
      }
      if (p.ctrlWork->test()) {
        p.ctrlWork->wait();
        heard(w);
        p.parked.push_back(decodeHeader(p.ctrlBuf.data(), {Kind::Pull, Kind::Done}, workerName(w)));
        postCtrl(w);
        progressed = true;
      }
    }
    for (int w = 0; w < opts_.workers; ++w) progressed |= serveParked(w);
    if (progressed) {
      idle = 0;
      continue;
    }
    checkLiveness();
    outbox_.reap();
    // Nothing arrived: back off from yielding to short sleeps (a server must not
    // take a core from the workers it serves).
    if (++idle < 32)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, 10 * (idle - 31))));
  }
  stats_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  sendFinal();
  // The last beats tell workers still declared dead that the run is over.
  for (int w = 0; w < opts_.workers; ++w)
    hb_->setNotice(w, kNoticeRunOver | (peers_[w].dead ? kNoticeDeclaredDead : 0));
  hb_->stop();
  return stats_;
}

void ParameterServer::sendFinal() {
  // Replies still on their way to live workers go first (a worker reads them
  // before it waits for the final state); those to dead workers are dropped.
  for (int w = 0; w < opts_.workers; ++w)
    for (auto& work : outbox_.pendingTo(w))
      if (!peers_[w].dead && !waitForWorker(*work, w)) break;
  auto st = paramStates(*optimizer_);
  const auto slots = static_cast<int32_t>(optimizer_->slotNames().size());
  if (const memory::Domain* d = memory::currentDomain()) stats_.memory = memory::snapshot(*d);
  const std::string json = stats_.toJson().dump();
  Header h;
  h.kind = Kind::Final;
  h.version = version_;
  h.optSteps = st.empty() ? 0 : *st[0].step->data<int64_t>();
  h.slots = slots;
  h.total = plan_.total;
  h.extra = static_cast<int64_t>(json.size());
  std::vector<float> head(kHeaderFloats);
  writeHeader(head.data(), h);
  std::vector<float> payload(static_cast<size_t>(1 + slots) * n_);
  std::memcpy(payload.data(), params_.data<float>(), n_ * sizeof(float));
  const auto& sl = plan_.slices[server_];
  for (size_t i = 0; i < sl.size(); ++i)
    for (int32_t k = 0; k < slots; ++k)
      std::memcpy(payload.data() + (1 + k) * n_ + sl[i].shardOffset, st[i].slots[k]->data<float>(),
                  sl[i].length * sizeof(float));
  const int dst = opts_.workerRank(0);
  auto deliver = [&](const void* data, size_t count, DType dtype) {
    auto work = comm_.isend(data, count, dtype, dst, kFinalTag);
    if (waitForWorker(*work, 0)) return;
    work->cancelIfPending();
    throw Error(concat("parameter server ", server_, ": ", workerName(0),
                       ", which reports the run, sent nothing for ", silence(0),
                       " s, not even a heartbeat (--ps-timeout ", opts_.timeoutS,
                       "): the final parameters have nowhere to go"));
  };
  deliver(head.data(), head.size(), DType::F32);
  deliver(payload.data(), payload.size(), DType::F32);
  deliver(json.data(), json.size(), DType::U8);
}

}  // namespace dtrain::parallel::ps
