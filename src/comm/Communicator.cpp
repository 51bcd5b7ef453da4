#include "comm/Communicator.h"

#include <algorithm>
#include <cstdio>

#include "comm/algorithms/Algorithms.h"
#include "comm/HangReport.h"
#include "comm/detail/Check.h"
#include "comm/detail/ReduceKernels.h"
#include "core/Error.h"

namespace dtrain::comm {

using dtrain::detail::concat;

namespace {
constexpr int kCheckTag = 1;  // internal channel tag of the descriptor exchange
constexpr int kNeverSentTag = 0x7ffe;  // internal tag no one sends (the skip hook's wait)

// A split's id in the flight recorder: the same on every member, different
// for each color (FNV-1a over the parent's id and the color).
uint32_t splitCommId(uint32_t parent, int color) {
  uint32_t h = 2166136261u;
  for (uint32_t x : {parent, static_cast<uint32_t>(color)}) h = (h ^ x) * 16777619u;
  return h <= 1 ? h + 2 : h;  // 0 means none, 1 the world
}

// Runs a wait; when it times out, reports the hang (HangReport.h) while this
// rank's call is still open in its recorder, then lets the error go on.
template <typename F>
void reportingHangs(F&& wait) {
  try {
    wait();
  } catch (const TimeoutError&) {
    flight::reportHang();
    throw;
  }
}

// Closes a call's flight entry however it leaves.
struct FlightEnd {
  FlightRecorder& recorder;
  uint64_t token;
  bool ok = false;
  ~FlightEnd() { recorder.end(token, !ok); }
};
}

void checkUserTag(int tag) {
  DTRAIN_CHECK(tag >= 0, "comm: tags must be >= 0 (got ", tag, ")");
}

std::string Call::name(int rank) const {
  return concat(desc.str(), " #", seq, " on rank ", rank);
}

namespace detail {

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

void compareCalls(const Call& call, int rank, const std::vector<CallDesc>& descs) {
  bool same = std::all_of(descs.begin(), descs.end(), [&](const CallDesc& d) { return d == descs[0]; });
  if (same) return;
  std::string msg = concat("collective mismatch at call #", call.seq, " (seen by rank ", rank,
                           "): ranks called different collectives:");
  for (size_t r = 0; r < descs.size(); ++r) msg += concat("\n  rank ", r, ": ", descs[r].str());
  throw Error(msg);
}

void throwNotArrived(const Call& call, int rank, const std::vector<int>& missing) {
  throw TimeoutError(concat(call.name(rank), ": timed out after ", call.opts.timeout.count(),
                            " ms waiting for rank", missing.size() > 1 ? "s " : " ",
                            rankList(missing), " to join (they never called it, or are stuck "
                            "in an earlier call)"));
}

Millis remaining(const Call& call) {
  auto left = std::chrono::duration_cast<Millis>(call.deadline - Clock::now());
  return std::max(left, Millis{1});
}

}  // namespace detail

Communicator::Communicator(int rank, int size, Millis timeout)
    : rank_(rank), size_(size), timeout_(timeout),
      recorder_(std::make_shared<FlightRecorder>(rank)) {
  // A top-level communicator is its rank's: the creating thread's phase marks
  // go to its recorder (split() rebinds to the parent's).
  FlightRecorder::bindThread(recorder_);
  flight::track(recorder_);
}

Communicator::~Communicator() { stopProgressThread(); }

std::string Communicator::rankName() const { return concat("rank ", rank_, "/", size_); }

void Communicator::stopProgressThread() {
  if (!progress_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(qMutex_);
    stop_ = true;
  }
  qCv_.notify_all();
  progress_.join();
}

// ---------------------------------------------------------------- point-to-point

void Communicator::send(const void* data, size_t count, DType dtype, int dst, int tag,
                        Millis timeout) {
  checkUserTag(tag);
  FlightEnd f{*recorder_, recorder_->begin(FlightKind::Send, static_cast<uint64_t>(tag),
                                           count * dtypeSize(dtype), dst, commId_, size_)};
  WorkPtr w = isend(data, count, dtype, dst, tag);
  reportingHangs([&] { w->wait(timeout); });
  f.ok = true;
}

void Communicator::recv(void* data, size_t count, DType dtype, int src, int tag, Millis timeout) {
  checkUserTag(tag);
  FlightEnd f{*recorder_, recorder_->begin(FlightKind::Recv, static_cast<uint64_t>(tag),
                                           count * dtypeSize(dtype), src, commId_, size_)};
  WorkPtr w = irecv(data, count, dtype, src, tag);
  reportingHangs([&] { w->wait(timeout); });
  f.ok = true;
}

WorkPtr Communicator::isend(const void* data, size_t count, DType dtype, int dst, int tag) {
  checkUserTag(tag);
  DTRAIN_CHECK(dst >= 0 && dst < size_, "comm: send to rank ", dst, " out of range [0, ", size_,
               ") on ", rankName());
  // Recorded as posted: its completion is the caller's wait, which the layer does not see.
  recorder_->end(recorder_->begin(FlightKind::Isend, static_cast<uint64_t>(tag),
                                  count * dtypeSize(dtype), dst, commId_, size_), false);
  return isendBytes(data, count * dtypeSize(dtype), dst, tag, Channel::User);
}

WorkPtr Communicator::irecv(void* data, size_t count, DType dtype, int src, int tag) {
  checkUserTag(tag);
  DTRAIN_CHECK(src >= 0 && src < size_, "comm: recv from rank ", src, " out of range [0, ", size_,
               ") on ", rankName());
  recorder_->end(recorder_->begin(FlightKind::Irecv, static_cast<uint64_t>(tag),
                                  count * dtypeSize(dtype), src, commId_, size_), false);
  return irecvBytes(data, count * dtypeSize(dtype), src, tag, Channel::User);
}

void Communicator::send(const Tensor& t, int dst, int tag, Millis timeout) {
  DTRAIN_CHECK(t.isContiguous(), "comm: send needs a contiguous tensor");
  send(t.rawData(), static_cast<size_t>(t.numel()), t.dtype(), dst, tag, timeout);
}

void Communicator::recv(Tensor& t, int src, int tag, Millis timeout) {
  DTRAIN_CHECK(t.isContiguous(), "comm: recv needs a contiguous tensor");
  recv(t.rawData(), static_cast<size_t>(t.numel()), t.dtype(), src, tag, timeout);
}

// ---------------------------------------------------------------- collectives

Call Communicator::makeCall(OpKind kind, const void* in, void* out, size_t count, DType dtype,
                            const Options& opts) {
  Call c;
  c.desc.kind = kind;
  c.desc.dtype = dtype;
  c.desc.count = count;
  c.desc.tag = opts.tag;
  if (kind == OpKind::Allreduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter) {
    c.desc.op = opts.op;
    detail::checkReducible(dtype, opts.op);
  }
  if (kind == OpKind::Allreduce) {
    c.desc.algo = opts.algo;
    c.desc.groupSize = opts.algo == Algorithm::Hier ? opts.groupSize : 0;
    DTRAIN_CHECK(opts.algo == Algorithm::Auto || supports(opts.algo), "comm: allreduce algorithm '",
                 algorithmName(opts.algo), "' is not available on backend '", backend(), "'");
  }
  if (kind == OpKind::Broadcast || kind == OpKind::Reduce) {
    c.desc.root = opts.root;
    DTRAIN_CHECK(opts.root >= 0 && opts.root < size_, "comm: ", opKindName(kind), " root ",
                 opts.root, " out of range [0, ", size_, ") on ", rankName());
  }
  c.in = in;
  c.out = out;
  c.opts = opts;
  if (c.opts.timeout.count() <= 0) c.opts.timeout = timeout_;
  c.seq = nextSeq_++;
  return c;
}

void Communicator::runNow(Call& call) {
  call.deadline = detail::deadlineAfter(call.opts.timeout);
  try {
    if (size_ > 1 && checksEnabled()) checkCall(call);
    execute(call);
  } catch (const TimeoutError& e) {
    std::string msg = e.what();
    if (msg.find(opKindName(call.desc.kind)) == 0) throw;  // already names the call
    throw TimeoutError(concat(call.name(rank_), ": ", msg));
  }
}

WorkPtr Communicator::submit(Call call, bool async) {
  if (commId_ == 1 && flight::skipHookFires(rank_, recorder_->step())) waitElsewhere(call);
  call.flightToken = recorder_->begin(flightKindOf(call.desc.kind), call.seq,
                                      call.desc.count * call.elemSize(), -1, commId_, size_);
  if (!async) {
    FlightEnd f{*recorder_, call.flightToken};
    drain();
    recorder_->start(call.flightToken);
    reportingHangs([&] { runNow(call); });
    f.ok = true;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(qMutex_);
  Millis waitLimit = call.opts.timeout * static_cast<int64_t>(queue_.size() + 2);
  auto work = std::make_shared<Work>(call.name(rank_), waitLimit);
  queue_.push_back({std::move(call), work});
  if (!progress_.joinable()) progress_ = std::thread([this] { progressLoop(); });
  qCv_.notify_all();
  return work;
}

void Communicator::progressLoop() {
  std::unique_lock<std::mutex> lock(qMutex_);
  for (;;) {
    qCv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    recorder_->start(p.call.flightToken);
    try {
      reportingHangs([&] { runNow(p.call); });
      recorder_->end(p.call.flightToken, false);
      p.work->complete();
    } catch (...) {
      recorder_->end(p.call.flightToken, true);
      p.work->fail(std::current_exception());
    }
    lock.lock();
    busy_ = false;
    qCv_.notify_all();
  }
}

void Communicator::drain() {
  // Nested calls from a collective running on the progress thread must not wait
  // for themselves.
  if (!progress_.joinable() || std::this_thread::get_id() == progress_.get_id()) return;
  std::unique_lock<std::mutex> lock(qMutex_);
  // Each queued call is bounded by its own deadline, so this wait is too.
  qCv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void Communicator::allreduce(const void* in, void* out, size_t count, DType dtype,
                             const Options& opts) {
  submit(makeCall(OpKind::Allreduce, in, out, count, dtype, opts), false);
}
WorkPtr Communicator::allreduceAsync(const void* in, void* out, size_t count, DType dtype,
                                     const Options& opts) {
  return submit(makeCall(OpKind::Allreduce, in, out, count, dtype, opts), true);
}
void Communicator::allreduce(Tensor& t, const Options& opts) {
  DTRAIN_CHECK(t.isContiguous(), "comm: allreduce needs a contiguous tensor");
  allreduce(t.rawData(), t.rawData(), static_cast<size_t>(t.numel()), t.dtype(), opts);
}
WorkPtr Communicator::allreduceAsync(Tensor& t, const Options& opts) {
  DTRAIN_CHECK(t.isContiguous(), "comm: allreduce needs a contiguous tensor");
  return allreduceAsync(t.rawData(), t.rawData(), static_cast<size_t>(t.numel()), t.dtype(), opts);
}

void Communicator::broadcast(void* data, size_t count, DType dtype, const Options& opts) {
  submit(makeCall(OpKind::Broadcast, data, data, count, dtype, opts), false);
}
WorkPtr Communicator::broadcastAsync(void* data, size_t count, DType dtype, const Options& opts) {
  return submit(makeCall(OpKind::Broadcast, data, data, count, dtype, opts), true);
}
void Communicator::broadcast(Tensor& t, const Options& opts) {
  DTRAIN_CHECK(t.isContiguous(), "comm: broadcast needs a contiguous tensor");
  broadcast(t.rawData(), static_cast<size_t>(t.numel()), t.dtype(), opts);
}

void Communicator::reduce(const void* in, void* out, size_t count, DType dtype,
                          const Options& opts) {
  submit(makeCall(OpKind::Reduce, in, out, count, dtype, opts), false);
}

void Communicator::allgather(const void* in, void* out, size_t count, DType dtype,
                             const Options& opts) {
  submit(makeCall(OpKind::Allgather, in, out, count, dtype, opts), false);
}
WorkPtr Communicator::allgatherAsync(const void* in, void* out, size_t count, DType dtype,
                                     const Options& opts) {
  return submit(makeCall(OpKind::Allgather, in, out, count, dtype, opts), true);
}

namespace {
Call& withCounts(Call& c, const std::vector<size_t>& counts, int size, int rank) {
  DTRAIN_CHECK(static_cast<int>(counts.size()) == size, "comm: allgatherv needs one count per rank (",
               size, "), got ", counts.size(), " on rank ", rank);
  c.counts = counts;
  uint64_t h = 1469598103934665603ull;  // FNV-1a: ranks must agree on every count
  for (size_t x : counts) h = (h ^ x) * 1099511628211ull;
  c.desc.countsHash = h;
  return c;
}
size_t total(const std::vector<size_t>& counts) {
  size_t t = 0;
  for (size_t c : counts) t += c;
  return t;
}
}  // namespace

void Communicator::allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                              DType dtype, const Options& opts) {
  Call c = makeCall(OpKind::Allgatherv, in, out, total(counts), dtype, opts);
  submit(std::move(withCounts(c, counts, size_, rank_)), false);
}

void Communicator::reduceScatter(const void* in, void* out, size_t count, DType dtype,
                                 const Options& opts) {
  DTRAIN_CHECK(count == 0 || in != out, "comm: reduceScatter cannot run in place");
  submit(makeCall(OpKind::ReduceScatter, in, out, count, dtype, opts), false);
}
WorkPtr Communicator::reduceScatterAsync(const void* in, void* out, size_t count, DType dtype,
                                         const Options& opts) {
  DTRAIN_CHECK(count == 0 || in != out, "comm: reduceScatter cannot run in place");
  return submit(makeCall(OpKind::ReduceScatter, in, out, count, dtype, opts), true);
}

void Communicator::alltoall(const void* in, void* out, size_t count, DType dtype,
                            const Options& opts) {
  DTRAIN_CHECK(count == 0 || in != out, "comm: alltoall cannot run in place");
  submit(makeCall(OpKind::Alltoall, in, out, count, dtype, opts), false);
}

void Communicator::barrier(const Options& opts) {
  submit(makeCall(OpKind::Barrier, nullptr, nullptr, 0, DType::U8, opts), false);
}
WorkPtr Communicator::barrierAsync(const Options& opts) {
  return submit(makeCall(OpKind::Barrier, nullptr, nullptr, 0, DType::U8, opts), true);
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const Options& opts) {
  drain();
  Call c = makeCall(OpKind::Split, nullptr, nullptr, 0, DType::U8, opts);
  FlightEnd f{*recorder_, recorder_->begin(FlightKind::Split, c.seq, 0, -1, commId_, size_)};
  c.deadline = detail::deadlineAfter(c.opts.timeout);
  if (size_ > 1 && checksEnabled()) checkCall(c);
  std::unique_ptr<Communicator> child = splitImpl(color, key, c);
  FlightRecorder::bindThread(recorder_);  // the child's constructor bound its own
  if (child) {
    child->recorder_ = recorder_;
    child->commId_ = splitCommId(commId_, color);
    recorder_->joinComm(child->commId_);
  }
  f.ok = true;
  return child;
}

void Communicator::waitElsewhere(const Call& call) {
  const int peer = (rank_ + 1) % size_;
  FlightEnd f{*recorder_, recorder_->begin(FlightKind::Recv, kNeverSentTag, 1, peer, commId_, size_)};
  std::fprintf(stderr, "dtrain: rank %d: DTRAIN_TEST_SKIP_CALL: not entering %s; waiting in a "
               "receive from rank %d instead\n", rank_, call.name(rank_).c_str(), peer);
  char byte = 0;
  irecvBytes(&byte, 1, peer, kNeverSentTag, Channel::Internal)->wait(call.opts.timeout * 4);
}

// ---------------------------------------------------------------- defaults

bool Communicator::supports(Algorithm algo) const {
  return algo == Algorithm::Auto || algo == Algorithm::Ring || algo == Algorithm::Rhd ||
         algo == Algorithm::Tree || algo == Algorithm::Hier;
}

Algorithm Communicator::chooseAllreduce(size_t bytes) const { return autoAllreduce(bytes, size_, 1); }

Algorithm Communicator::autoAllreduce(size_t bytes, int ranks, int ranksPerHost) {
  // The binomial tree and recursive halving take as many steps (2 log2 n), and
  // the tree's carry the whole message where halving's carry halves and
  // quarters: the tree wins only where a step's latency is all there is, up
  // to a few KiB (and its idle ranks leave shared cores to the others). From
  // 4 KiB, with one rank a host, halving's smaller steps win once the link's
  // bandwidth counts at all.
  if (bytes <= 4096 || (ranksPerHost > 1 && bytes <= 16384)) return Algorithm::Tree;
  // Recursive halving and doubling moves the ring's bytes in 2 log2(n) steps
  // instead of 2 (n - 1): it wins only the latency of the steps it saves, which
  // matters less the larger the message, so it stops at 16 KiB a rank. Its
  // first steps pair ranks n/2 apart: with several ranks a host, all of a
  // host's ranks send across at once, where the ring sends one, so the host's
  // link is shared by all of them in every step.
  if (ranksPerHost <= 1 && bytes <= std::min<size_t>(size_t{1} << 20, size_t{16384} * std::max(1, ranks)))
    return Algorithm::Rhd;
  // Several ranks on each of several hosts: the hierarchical allreduce (mpi:
  // through each host's shared memory, every local rank ringing its slice
  // between hosts) sends (hosts - 1) / hosts of the bytes across a host's link
  // twice, the flat ring (ranks - 1) / ranks, and it leaves the host's loopback
  // TCP idle; it won from 16 KiB on emulated hosts.
  if (ranksPerHost > 1 && ranks > ranksPerHost) return Algorithm::Hier;
  return Algorithm::Ring;
}

int Communicator::defaultGroupSize() const { return size_ >= 4 ? 2 : size_; }

Communicator::HierGroups& Communicator::hierGroups(int groupSize, const Call& call) {
  auto it = hier_.find(groupSize);
  if (it != hier_.end()) return it->second;
  HierGroups g;
  Options o;
  o.timeout = detail::remaining(call);
  g.group = split(rank_ / groupSize, rank_, o);
  g.leaders = split(rank_ % groupSize == 0 ? 0 : -1, rank_, o);
  if (g.group) g.group->traffic_ = traffic_;
  if (g.leaders) g.leaders->traffic_ = traffic_;
  return hier_.emplace(groupSize, std::move(g)).first->second;
}

char* Communicator::scratch(int slot, size_t bytes) {
  auto& s = scratch_[slot];
  if (s.size() < bytes) s.resize(bytes);
  return s.data();
}

void Communicator::checkCall(const Call& call) {
  // Every rank sends its descriptor to every other rank: O(n^2) tiny messages,
  // fine for the world sizes on one machine and it tells exactly who is missing.
  std::vector<CallDesc> descs(size_);
  descs[rank_] = call.desc;
  std::vector<WorkPtr> recvs(size_), sends;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    recvs[r] = irecvBytes(&descs[r], sizeof(CallDesc), r, kCheckTag, Channel::Internal);
  }
  for (int r = 0; r < size_; ++r)
    if (r != rank_)
      sends.push_back(isendBytes(&call.desc, sizeof(CallDesc), r, kCheckTag, Channel::Internal));
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    try {
      recvs[r]->wait(missing.empty() ? detail::remaining(call) : Millis{1});
    } catch (const PeerSilentError&) {
      throw;  // names the silent peer already
    } catch (const TimeoutError&) {
      missing.push_back(r);
    }
  }
  if (!missing.empty()) detail::throwNotArrived(call, rank_, missing);
  for (auto& s : sends) s->wait(detail::remaining(call));
  detail::compareCalls(call, rank_, descs);
}

void Communicator::execute(Call& call) {
  switch (call.desc.kind) {
    case OpKind::Allreduce: {
      Algorithm a = call.desc.algo == Algorithm::Auto
                        ? chooseAllreduce(call.desc.count * call.elemSize())
                        : call.desc.algo;
      switch (a) {
        case Algorithm::Ring: return algorithms::ringAllreduce(*this, call);
        case Algorithm::Rhd: return algorithms::rhdAllreduce(*this, call);
        case Algorithm::Tree: return algorithms::treeAllreduce(*this, call);
        case Algorithm::Hier: return algorithms::hierAllreduce(*this, call);
        default:
          throw Error(concat("comm: allreduce algorithm '", algorithmName(a),
                             "' is not available on backend '", backend(), "'"));
      }
    }
    case OpKind::Broadcast: return algorithms::treeBroadcast(*this, call);
    case OpKind::Reduce: return algorithms::treeReduce(*this, call);
    case OpKind::Allgather:
      call.counts.assign(size_, call.desc.count);
      return algorithms::ringAllgatherv(*this, call);
    case OpKind::Allgatherv: return algorithms::ringAllgatherv(*this, call);
    case OpKind::ReduceScatter: return algorithms::ringReduceScatter(*this, call);
    case OpKind::Alltoall: return algorithms::pairwiseAlltoall(*this, call);
    case OpKind::Barrier: return algorithms::disseminationBarrier(*this, call);
    case OpKind::Split: break;
  }
  throw Error("comm: internal error: unhandled collective");
}

}  // namespace dtrain::comm
