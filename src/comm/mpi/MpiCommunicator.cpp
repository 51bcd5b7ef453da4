#include "comm/mpi/MpiCommunicator.h"

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>

#include "comm/detail/Check.h"
#include "comm/detail/ReduceKernels.h"
#include "comm/detail/Traffic.h"
#include "comm/mpi/HostHier.h"
#include "comm/mpi/Liveness.h"
#include "comm/mpi/MpiBackend.h"
#include "comm/mpi/NodeShm.h"
#include "comm/mpi/Watchdog.h"
#include "core/Error.h"
#include "core/StopSignal.h"

namespace dtrain::comm::mpi {

using dtrain::detail::concat;

namespace {

bool gStartedMpi = false;
bool gLeftWithoutFinalize = false;

// A rank of mpirun's that got SIGTERM itself leaves without MPI_Finalize.
// SIGTERM is how SLURM (scancel, a time limit) and mpirun end a job, and mpirun
// and its daemons get it too: they tear the job down (SIGTERM, then SIGKILL,
// odls_base_sigkill_timeout seconds apart, asleep in between) and no longer
// answer the fence MPI_Finalize waits for, so the ranks, their checkpoint
// written, hung there until killed, without their result line.
bool mpirunIsEndingTheJob() {
  return stop::receivedSignal() == SIGTERM && std::getenv("OMPI_MCA_orte_hnp_uri") != nullptr;
}

void atExitFinalize() {
  int done = 0;
  MPI_Finalized(&done);
  if (done || gLeftWithoutFinalize) return;
  stopHeartbeat();
  MPI_Finalize();
}

// OpenMPI's TCP transport sends a message above its eager limit (64 KiB by
// default) only after a rendezvous: the receiver's clear-to-send. On a
// bandwidth-limited link that answer queues behind the receiver's own
// outgoing data, so the two directions of a ring step take turns instead of
// flowing together, and an allreduce takes almost twice the link's time.
// Set for OpenMPI to read at MPI_Init, unless the user set them.
void raiseTcpEagerLimit() {
  for (const char* name : {"OMPI_MCA_btl_tcp_eager_limit", "OMPI_MCA_btl_tcp_rndv_eager_limit"})
    ::setenv(name, "4194304", /*overwrite=*/0);
}

void ensureInit() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    raiseTcpEagerLimit();
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    gStartedMpi = true;
    std::atexit(atExitFinalize);
  }
  int provided = 0;
  MPI_Query_thread(&provided);
  DTRAIN_CHECK(provided >= MPI_THREAD_MULTIPLE,
               "mpi backend: the MPI library provides thread level ", provided,
               ", but MPI_THREAD_MULTIPLE is needed (async collectives run on a progress thread)");
}

std::string errorString(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  return std::string(buf, len);
}

void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw Error(concat("mpi backend: ", what, " failed: ", errorString(rc)));
}

int toInt(size_t n, const Call& call, int rank) {
  DTRAIN_CHECK(n <= static_cast<size_t>(INT_MAX), call.name(rank), ": count ", n,
               " exceeds what one MPI call can move (INT_MAX)");
  return static_cast<int>(n);
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8: return MPI_UINT8_T;
    case DType::F16: case DType::BF16: return MPI_UINT16_T;  // moved, never reduced natively
  }
  return MPI_BYTE;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
  }
  return MPI_SUM;
}

// A nonblocking point-to-point operation; completion is found by MPI_Test.
class MpiWork : public Work {
 public:
  MpiWork(std::string what, Millis timeout, int peer, int worldPeer, bool isSend, size_t bytes)
      : Work(std::move(what), timeout), peer_(peer), worldPeer_(worldPeer), isSend_(isSend),
        bytes_(bytes) {}
  ~MpiWork() override {
    if (!finished()) cancel();
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 protected:
  bool polled() const override { return true; }
  bool poll() override {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || finished()) return finished();
    int flag = 0;
    MPI_Status st;
    int rc = MPI_Test(&req_, &flag, &st);
    if (rc != MPI_SUCCESS) {
      fail(std::make_exception_ptr(Error(concat(what(), ": ", errorString(rc)))));
      return true;
    }
    if (!flag) return false;
    if (!isSend_) {
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (static_cast<size_t>(got) != bytes_) {
        fail(std::make_exception_ptr(Error(concat(
            "comm: message size mismatch: rank ", peer_, " sent ", got, " bytes, ", what(),
            " expected ", bytes_))));
        return true;
      }
    }
    complete();
    return true;
  }
  void cancel() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished() || req_ == MPI_REQUEST_NULL) return;
    if (isSend_) {
      MPI_Request_free(&req_);  // cancelling sends is deprecated; let it drain
    } else {
      MPI_Cancel(&req_);
      MPI_Wait(&req_, MPI_STATUS_IGNORE);
    }
  }
  std::string pendingDetail() const override {
    return concat("rank ", peer_, isSend_ ? " never received it" : " never sent it");
  }
  // A peer without heartbeats fails the wait at --comm-timeout, not --call-timeout.
  void check() override { throwIfSilent({worldPeer_}, what()); }

 private:
  std::mutex mutex_;
  int peer_, worldPeer_;
  bool isSend_;
  size_t bytes_;
};

int commRank(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int commSize(MPI_Comm c) {
  int s = 0;
  MPI_Comm_size(c, &s);
  return s;
}
// Ranks of the whole run on this machine's kernel (the same boot id): emulated
// hosts (scripts/netsim.sh's network namespaces) and containers of one machine
// share its cores, where MPI's shared-memory split sees each as a node of its
// own. Counted once, by the world communicator; 0 before (or off Linux).
std::atomic<int> gRanksOnMachine{0};

int countRanksOnMachine() {
  std::array<char, 40> mine{};
  std::string id;
  if (std::ifstream in("/proc/sys/kernel/random/boot_id"); in >> id)
    std::copy_n(id.begin(), std::min(id.size(), mine.size() - 1), mine.begin());
  const int n = commSize(MPI_COMM_WORLD);
  std::vector<char> all(mine.size() * static_cast<size_t>(n));
  check(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                      static_cast<int>(mine.size()), MPI_CHAR, MPI_COMM_WORLD),
        "MPI_Allgather of the boot ids");
  if (id.empty()) return 0;
  int same = 0;
  for (int r = 0; r < n; ++r) same += std::equal(mine.begin(), mine.end(), all.begin() + r * static_cast<long>(mine.size()));
  return same;
}

// Whom a collective of this rank's communicator waits for, for the watchdog's line.
std::string othersOf(int rank, int size) {
  if (size > 9) return concat("the other ", size - 1, " ranks");
  std::string s;
  for (int r = 0; r < size; ++r)
    if (r != rank) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return (size == 2 ? "rank " : "ranks ") + s;
}

}  // namespace

int ranksOnThisMachine() { return gRanksOnMachine.load(); }

std::unique_ptr<Communicator> makeMpiCommunicator(const BackendConfig& config) {
  ensureInit();
  const Millis timeout = config.timeout.count() > 0 ? config.timeout : defaultTimeout();
  setWatchdogTimeout(timeout);  // --call-timeout, for the calls that block inside MPI
  // Right after MPI_Init, which every rank leaves together: a peer is judged
  // silent from here on (Liveness.h).
  startHeartbeat(config.peerTimeout.count() > 0 ? config.peerTimeout : defaultPeerTimeout());
  // Test seam: DTRAIN_TEST_STALL_RANK=r stalls rank r here (a wedged process), so
  // that its peers block inside MPI_Comm_dup and the watchdog must end the job.
  if (const char* s = std::getenv("DTRAIN_TEST_STALL_RANK"); s && std::atoi(s) == commRank(MPI_COMM_WORLD))
    std::this_thread::sleep_for(std::chrono::hours(1));
  MPI_Comm dup;
  {
    BlockingScope blocking("MPI_Comm_dup of the world", othersOf(commRank(MPI_COMM_WORLD), commSize(MPI_COMM_WORLD)), timeout,
                           worldPeersOf(MPI_COMM_WORLD));
    check(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
    if (gRanksOnMachine.load() == 0) gRanksOnMachine = countRanksOnMachine();
  }
  auto comm = std::make_unique<MpiCommunicator>(dup, timeout);
  setHeartbeatRecorder(comm->flightRecorderPtr());
  // Test seam: DTRAIN_TEST_FREEZE_RANK=r stops rank r's whole process (SIGSTOP:
  // its heartbeat too), as a host that froze or lost its link, once its world is set up.
  if (const char* s = std::getenv("DTRAIN_TEST_FREEZE_RANK"); s && std::atoi(s) == commRank(MPI_COMM_WORLD))
    std::raise(SIGSTOP);
  return comm;
}

void finalize(int exitCode, const std::string& message) {
  int inited = 0, done = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&done);
  if (!inited || done || !gStartedMpi) return;
  if (exitCode != 0 && commSize(MPI_COMM_WORLD) > 1) {
    if (!message.empty())
      std::fprintf(stderr, "dtrain: rank %d: %s\n", commRank(MPI_COMM_WORLD), message.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, exitCode);
  }
  // Beats stop first (no MPI call may run beside MPI_Finalize); every rank has
  // passed its last collective, so none waits on this one's beats any more.
  stopHeartbeat();
  if (mpirunIsEndingTheJob()) {
    gLeftWithoutFinalize = true;
    return;
  }
  BlockingScope blocking("MPI_Finalize", "every rank to finish");
  MPI_Finalize();
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, Millis timeout)
    : Communicator(commRank(comm), commSize(comm), timeout), user_(comm),
      worldRanks_(worldRanksOf(comm)), worldPeers_(worldPeersOf(comm)) {
  BlockingScope blocking("a communicator's setup (MPI_Comm_dup, MPI_Comm_split_type)", othersOf(rank(), size()), timeout,
                         worldPeers_);
  check(MPI_Comm_dup(comm, &internal_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(user_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(internal_, MPI_ERRORS_RETURN);
  MPI_Comm node;
  check(MPI_Comm_split_type(internal_, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int nodeSize = commSize(node);
  MPI_Comm_free(&node);
  int sizes[2] = {nodeSize, -nodeSize}, extremes[2] = {0, 0};  // the smallest node, minus the largest
  check(MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MIN, internal_), "MPI_Allreduce");
  const int minNode = extremes[0];
  oneNode_ = minNode == size();
  nodeGroup_ = minNode;
  uniformNodes_ = minNode == -extremes[1];
  // Ranks that outnumber this machine's cores wait without spinning, whether
  // MPI calls their host one node or several.
  spin_ = comm::detail::spinTime(std::max(nodeSize, gRanksOnMachine.load()));
  oversubscribed_ = spin_.count() == 0;
}

MpiCommunicator::~MpiCommunicator() {
  stopProgressThread();
  int done = 0;
  MPI_Finalized(&done);
  if (done) return;
  // Freeing the shared window synchronizes all ranks: skip it while unwinding an
  // error (the peers may never come), the OS reclaims the memory.
  if (std::uncaught_exceptions() == 0) {
    shm_.reset();  // watched (NodeShm)
    hosts_.reset();
  } else {
    (void)shm_.release();
    if (hosts_) hosts_->abandon();
    hosts_.reset();
  }
  MPI_Comm_free(&internal_);
  MPI_Comm_free(&user_);
}

WorkPtr MpiCommunicator::isendBytes(const void* data, size_t bytes, int dst, int tag, Channel ch) {
  DTRAIN_CHECK(bytes <= static_cast<size_t>(INT_MAX), "mpi backend: message of ", bytes,
               " bytes is too large for one send");
  auto w = std::make_shared<MpiWork>(
      concat("send of ", bytes, " bytes from rank ", rank(), " to rank ", dst, " (tag ", tag,
             ch == Channel::Internal ? ", internal)" : ")"),
      timeout(), dst, dst >= 0 && dst < size() ? worldRanks_[dst] : -1, true, bytes);
  w->setSpin(spin_);
  countSent(bytes);
  check(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dst, tag,
                  ch == Channel::User ? user_ : internal_, &w->req_),
        "MPI_Isend");
  return w;
}

WorkPtr MpiCommunicator::irecvBytes(void* data, size_t bytes, int src, int tag, Channel ch) {
  DTRAIN_CHECK(bytes <= static_cast<size_t>(INT_MAX), "mpi backend: message of ", bytes,
               " bytes is too large for one receive");
  auto w = std::make_shared<MpiWork>(
      concat("recv of ", bytes, " bytes on rank ", rank(), " from rank ", src, " (tag ", tag,
             ch == Channel::Internal ? ", internal)" : ")"),
      timeout(), src, src >= 0 && src < size() ? worldRanks_[src] : -1, false, bytes);
  w->setSpin(spin_);
  // A longer message fails with MPI's truncation error, a shorter one with our
  // size-mismatch error (MpiWork::poll).
  countReceived(bytes);
  check(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, src, tag,
                  ch == Channel::User ? user_ : internal_, &w->req_),
        "MPI_Irecv");
  return w;
}

bool MpiCommunicator::supports(Algorithm algo) const {
  if (algo == Algorithm::Native) return true;
  if (algo == Algorithm::Shm) return oneNode_;
  return Communicator::supports(algo);
}

Algorithm MpiCommunicator::chooseAllreduce(size_t bytes) const {
  // Across nodes: by size and ranks per node (autoAllreduce); hosts with
  // different numbers of ranks have no shared-memory hier: the ring there.
  if (!oneNode_) {
    const Algorithm a = autoAllreduce(bytes, size(), nodeGroup_);
    return a == Algorithm::Hier && !uniformNodes_ ? Algorithm::Ring : a;
  }
  // On one node shm moves each byte the fewest times. Its hand-offs involve every
  // rank, which costs context switches when ranks outnumber cores: then up to 16
  // KiB a tree (half its ranks idle each step), above it what autoAllreduce
  // picks for one rank a host (recursive halving up to 16 KiB a rank).
  if (size() > 1 && (!oversubscribed_ || bytes > (64u << 10))) return Algorithm::Shm;
  return bytes <= 16384 ? Algorithm::Tree : Communicator::chooseAllreduce(bytes);
}

void MpiCommunicator::execute(Call& call) {
  // MPI has no 16-bit float sum (F16/BF16 travel as MPI_UINT16_T): those
  // reductions run dtrain's algorithms, which sum them in fp32.
  const bool half = call.desc.dtype == DType::F16 || call.desc.dtype == DType::BF16;
  switch (call.desc.kind) {
    case OpKind::Allreduce: {
      Algorithm a = call.desc.algo == Algorithm::Auto
                        ? chooseAllreduce(call.desc.count * call.elemSize())
                        : call.desc.algo;
      if (a == Algorithm::Native && half) {
        call.desc.algo = Algorithm::Ring;
        return Communicator::execute(call);
      }
      if (a == Algorithm::Native) return native(call);
      if (a == Algorithm::Shm) return size() == 1 ? native(call) : shmAllreduce(call);
      if (a == Algorithm::Hier && hierThroughHosts(call)) return hostHierAllreduce(call);
      return Communicator::execute(call);
    }
    case OpKind::ReduceScatter:
      // dtrain's ring (ZeRO's gradients): OpenMPI's own reduce-scatter does not
      // keep a bandwidth-limited link busy the way a ring does (ZeRO then runs
      // behind plain allreduce on the same bytes), and it cannot sum 16-bit
      // floats.
      return Communicator::execute(call);
    case OpKind::Reduce:
      return half || largeForLibnbc(call) ? Communicator::execute(call) : native(call);
    case OpKind::Barrier:
      if (callChecks() && size() > 1) return;  // the all-to-all descriptor exchange was one
      return native(call);
    case OpKind::Split: return;
    default: return largeForLibnbc(call) ? Communicator::execute(call) : native(call);
  }
}

bool MpiCommunicator::hierThroughHosts(const Call& call) const {
  // Groups other than the hosts (an explicit groupSize) keep the generic
  // algorithm over sub-communicators.
  const int g = call.desc.groupSize;
  return !oneNode_ && uniformNodes_ && nodeGroup_ > 1 && (g == 0 || g == nodeGroup_);
}

std::unique_ptr<HostGroups> MpiCommunicator::makeHostGroups(const Call& call) {
  auto h = std::make_unique<HostGroups>();
  {
    BlockingScope blocking("MPI_Comm_split_type (" + call.name(rank()) + ")", othersOf(rank(), size()),
                           call.opts.timeout, worldPeers_);
    check(MPI_Comm_split_type(internal_, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &h->node),
          "MPI_Comm_split_type");
  }
  h->localRank = commRank(h->node);
  h->localSize = commSize(h->node);
  h->shm = std::make_unique<NodeShm>(h->node);
  Options o;
  o.timeout = comm::detail::remaining(call);
  h->cross = split(h->localRank, rank(), o);
  h->cross->setCallChecks(false);  // its calls are parts of one call checked here
  return h;
}

void MpiCommunicator::hostHierAllreduce(Call& call) {
  if (!hosts_) hosts_ = makeHostGroups(call);
  // Inside the host: the direct shm allreduce's data flow among the local ranks.
  auto t = comm::detail::shmTraffic(call, hosts_->localRank, hosts_->localSize);
  const uint64_t crossSent = hosts_->cross->bytesSent(), crossReceived = hosts_->cross->bytesReceived();
  hostAllreduce(*hosts_, call, size(), spin_);
  // Between hosts: what the cross communicator moved (its rings are all done).
  countSent(t.sent + hosts_->cross->bytesSent() - crossSent);
  countReceived(t.received + hosts_->cross->bytesReceived() - crossReceived);
}

bool MpiCommunicator::largeForLibnbc(const Call& call) const {
  // OpenMPI 4.1's nonblocking collectives (libnbc: MPI_Ireduce, MPI_Ibcast,
  // MPI_Iallgather...) progress a schedule whose rounds, when they complete at
  // once (ranks of one host), recurse NBC_Progress -> NBC_Start_round ->
  // NBC_Progress: a 64 MiB reduce or broadcast overflowed the stack (the
  // hierarchical allreduce, 2 ranks per emulated host). Large messages take
  // dtrain's own algorithms over point-to-point instead.
  return call.desc.count * call.elemSize() > kLibnbcMaxBytes;
}

void MpiCommunicator::waitRequest(MPI_Request& req, const Call& call) {
  int rc = MPI_SUCCESS;
  auto done = [&] {
    int flag = 0;
    rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    return flag != 0 || rc != MPI_SUCCESS;
  };
  // MPI_Test may itself block in the progress engine: the watchdog backs the deadline.
  BlockingScope blocking(call.name(rank()), othersOf(rank(), size()), call.opts.timeout, worldPeers_);
  const auto peersAlive = [&] { throwIfSilent(worldPeers_, call.name(rank())); };
  if (!comm::detail::waitUntil(done, call.deadline, peersAlive, nullptr, spin_))
    throw TimeoutError(concat(call.name(rank()), ": timed out after ", call.opts.timeout.count(),
                              " ms inside the MPI library (a rank stopped progressing)"));
  check(rc, call.name(rank()));
}

void MpiCommunicator::native(Call& call) {
  const int r = rank();
  const size_t es = call.elemSize();
  const int n = toInt(call.desc.count, call, r);
  const MPI_Datatype t = mpiType(call.desc.dtype);
  const MPI_Op op = mpiOp(call.desc.op);
  char* out = static_cast<char*>(call.out);
  const void* in = call.in;
  MPI_Request req = MPI_REQUEST_NULL;
  const std::string what = call.name(r);
  if (size() > 1) {
    // Inside the library: counted by formula (see nativeTraffic), there is no other way.
    auto t = comm::detail::nativeTraffic(call, r, size());
    countSent(t.sent);
    countReceived(t.received);
  }
  switch (call.desc.kind) {
    case OpKind::Allreduce:
      // The library's own blocking MPI_Allreduce, exactly what a user would call.
      {
        BlockingScope blocking("MPI_Allreduce (" + what + ")", othersOf(rank(), size()), call.opts.timeout,
                               worldPeers_);
        check(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, n, t, op, internal_), what);
      }
      if (call.desc.op == ReduceOp::Avg) comm::detail::scaleForAvg(out, call.desc.count, call.desc.dtype, size());
      return;
    case OpKind::Broadcast:
      check(MPI_Ibcast(out, n, t, call.desc.root, internal_, &req), what);
      break;
    case OpKind::Reduce:
      check(MPI_Ireduce(r == call.desc.root && in == out ? MPI_IN_PLACE : in, out, n, t, op,
                        call.desc.root, internal_, &req), what);
      break;
    case OpKind::Allgather:
      check(MPI_Iallgather(in == out + r * call.desc.count * es ? MPI_IN_PLACE : in, n, t, out, n,
                           t, internal_, &req), what);
      break;
    case OpKind::Allgatherv: {
      std::vector<int> counts(size()), displs(size());
      size_t off = 0;
      for (int k = 0; k < size(); ++k) {
        counts[k] = toInt(call.counts[k], call, r);
        displs[k] = toInt(off, call, r);
        off += call.counts[k];
      }
      bool inPlace = in == out + displs[r] * es;
      check(MPI_Iallgatherv(inPlace ? MPI_IN_PLACE : in, counts[r], t, out, counts.data(),
                            displs.data(), t, internal_, &req), what);
      waitRequest(req, call);  // counts/displs must live until completion
      return;
    }
    case OpKind::ReduceScatter:
      check(MPI_Ireduce_scatter_block(in, out, n, t, op, internal_, &req), what);
      break;
    case OpKind::Alltoall:
      check(MPI_Ialltoall(in, n, t, out, n, t, internal_, &req), what);
      break;
    case OpKind::Barrier:
      check(MPI_Ibarrier(internal_, &req), what);
      break;
    case OpKind::Split: return;
  }
  waitRequest(req, call);
  bool scaled = call.desc.op == ReduceOp::Avg &&
                (call.desc.kind == OpKind::ReduceScatter ||
                 (call.desc.kind == OpKind::Reduce && r == call.desc.root));
  if (scaled) comm::detail::scaleForAvg(out, call.desc.count, call.desc.dtype, size());
}

std::unique_ptr<Communicator> MpiCommunicator::splitImpl(int color, int key, Call& call) {
  MPI_Comm sub;
  {
    BlockingScope blocking("MPI_Comm_split (" + call.name(rank()) + ")", othersOf(rank(), size()), call.opts.timeout,
                           worldPeers_);
    check(MPI_Comm_split(user_, color < 0 ? MPI_UNDEFINED : color, key, &sub), call.name(rank()));
  }
  if (sub == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(sub, timeout());
}

}  // namespace dtrain::comm::mpi
