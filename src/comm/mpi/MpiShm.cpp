// The mpi backend's `shm` allreduce, for ranks on one node, in two variants:
// - direct (when the kernel allows cross-memory attach, process_vm_readv): the
//   local backend's data flow; each rank reduces its slice reading its peers'
//   buffers, then copies every peer's reduced slice; one kernel copy per read;
// - staged (otherwise): each block of the buffer goes through three pipelined
//   stages in an MPI-3 shared window: copy the input block into this rank's
//   staging buffer; reduce this rank's slice from every rank's staging buffer;
//   copy every rank's reduced slice into the output. Buffers are double-buffered
//   by block parity; before reusing one, a rank waits until every peer has
//   finished reading it (flags of block g-2).
// Both synchronize through per-rank progress flags in the shared segment: no MPI
// calls on the data path.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/algorithms/P2P.h"
#include "comm/detail/Check.h"
#include "comm/detail/ReduceKernels.h"
#include "comm/detail/Traffic.h"
#include "comm/mpi/MpiCommunicator.h"
#include "comm/mpi/NodeShm.h"
#include "core/Error.h"
#include "core/Resumed.h"

#include "comm/mpi/Liveness.h"
#include "comm/mpi/Watchdog.h"

namespace dtrain::comm::mpi {

using dtrain::detail::concat;

NodeShm::NodeShm(MPI_Comm comm) : worldRanks_(worldRanksOf(comm)), worldPeers_(worldPeersOf(comm)) {
  int n = 0, r = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  // Collective setup inside MPI: the watchdog ends the job if a peer never comes.
  BlockingScope blocking("the shared-memory window's setup", concat("the other ", n - 1, " ranks of this host"),
                         Millis{0}, worldPeers_);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  char* mine = nullptr;
  MPI_Aint bytes = static_cast<MPI_Aint>(kHeader + 4 * kBlockBytes);
  int rc = MPI_Win_allocate_shared(bytes, 1, info, comm, &mine, &win_);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) throw Error("mpi backend: MPI_Win_allocate_shared failed");
  std::memset(mine, 0, kHeader);
  base_.resize(n);
  for (int k = 0; k < n; ++k) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    MPI_Win_shared_query(win_, k, &size, &disp, &p);
    base_[k] = static_cast<char*>(p);
  }
  word(r, 0).store(static_cast<uint64_t>(getpid()));
  word(r, 3).store(reinterpret_cast<uint64_t>(mine));  // where my header lives for me
  MPI_Barrier(comm);  // every header is zeroed before anyone polls it
  pids_.resize(n);
  for (int k = 0; k < n; ++k) pids_[k] = static_cast<int>(word(k, 0).load());
  // Probe cross-memory attach on a peer: read its pid through its own mapping.
  int ok = 1;
  if (n > 1) {
    int peer = (r + 1) % n;
    uint64_t got = 0;
    iovec local{&got, sizeof got};
    iovec remote{reinterpret_cast<char*>(word(peer, 3).load()) + 256, sizeof got};  // word 0: pid
    ok = process_vm_readv(pids_[peer], &local, 1, &remote, 1, 0) == sizeof got &&
         got == static_cast<uint64_t>(pids_[peer]);
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  cma_ = all == 1;
  if (std::getenv("DTRAIN_COMM_DEBUG")) std::fprintf(stderr, "rank %d: node shm, cma=%d (probe %d)\n", r, int(cma_), ok);
}

NodeShm::~NodeShm() {
  BlockingScope blocking("MPI_Win_free of the shared-memory window", "the other ranks of this host",
                         Millis{0}, worldPeers_);
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
}

namespace {

// How long a wait yields before it naps. Yielding is a context switch each
// time another rank is runnable: where the ranks outnumber the cores (spin 0),
// nap after a short while: long yields there keep every waiting rank runnable
// and take a large share of the cores from the computing ones.
constexpr auto kYieldBeforeNap = std::chrono::milliseconds(20);
constexpr auto kYieldBeforeNapOversubscribed = std::chrono::microseconds(200);

// Spins, then yields (ranks may outnumber cores), then naps; gives up at the
// call's deadline and names the ranks whose flag lags. Waits for ranks [lo, hi).
void waitRange(NodeShm& shm, NodeShm::Flag f, uint64_t want, int lo, int hi, const Call& call,
               int rank, std::chrono::microseconds spin) {
  auto lagging = [&](std::vector<int>* who) {
    bool any = false;
    for (int k = lo; k < hi; ++k)
      if (shm.flag(k, f).load(std::memory_order_acquire) < want) {
        any = true;
        if (!who) return true;
        who->push_back(k);
      }
    return any;
  };
  auto start = comm::detail::Clock::now();
  auto deadline = call.deadline;  // moved on when the process continues from a stop
  const auto length = deadline - start;
  resumed::Tracker continues;
  for (uint32_t i = 1;; ++i) {
    if (!lagging(nullptr)) return;
    comm::detail::cpuRelax();
    if ((i & 127) == 0 && (i > 128 * 1024 || comm::detail::Clock::now() - start >= spin)) break;
  }
  for (uint64_t i = 0;; ++i) {
    if (!lagging(nullptr)) return;
    if ((i & 63) == 0) {
      auto now = comm::detail::Clock::now();
      std::vector<int> who;
      if (now >= deadline && !comm::detail::continuedSince(continues, deadline, length)) {
        lagging(&who);
        comm::detail::throwNotArrived(call, rank, who);
      }
      if ((i & 4095) == 0) {  // a lagging peer without heartbeats: --comm-timeout
        lagging(&who);
        for (int& k : who) k = shm.worldRank(k);
        throwIfSilent(who, call.name(rank));
      }
      if (now - start > (spin.count() > 0 ? kYieldBeforeNap : kYieldBeforeNapOversubscribed)) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        continue;
      }
    }
    std::this_thread::yield();
  }
}

void waitFlags(NodeShm& shm, NodeShm::Flag f, uint64_t want, int n, const Call& call, int rank,
               std::chrono::microseconds spin) {
  waitRange(shm, f, want, 0, n, call, rank, spin);
}

void waitFlag(NodeShm& shm, int peer, NodeShm::Flag f, uint64_t want, const Call& call, int rank,
              std::chrono::microseconds spin) {
  waitRange(shm, f, want, peer, peer + 1, call, rank, spin);
}

}  // namespace

void waitShmFlags(NodeShm& shm, NodeShm::Flag f, uint64_t want, int lo, int hi, const Call& call,
                  int rank, std::chrono::microseconds spin) {
  waitRange(shm, f, want, lo, hi, call, rank, spin);
}

namespace {

// Copies `bytes` from address `src` of process `pid` into `dst`.
void readPeer(int pid, void* dst, const void* src, size_t bytes, const Call& call, int rank) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  while (bytes) {
    iovec local{d, bytes};
    iovec remote{const_cast<char*>(s), bytes};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      throw Error(dtrain::detail::concat(call.name(rank), ": process_vm_readv from pid ", pid,
                                         " failed: ", std::strerror(errno)));
    }
    d += got;
    s += got;
    bytes -= static_cast<size_t>(got);
  }
}

}  // namespace

// The direct algorithm over cross-memory attach: the same data flow as the local
// backend's shm allreduce (reduce my slice from every rank's input, then copy every
// rank's reduced slice), with peers' memory read by the kernel in one copy.
void MpiCommunicator::cmaAllreduce(Call& call) {
  NodeShm& shm = *shm_;
  const int n = size(), r = rank();
  const size_t count = call.desc.count, es = call.elemSize();
  const DType dt = call.desc.dtype;
  const ReduceOp op = call.desc.op;
  const uint64_t g = shm.nextCall();
  const uint64_t tagBits = (g + 1) << 32;
  using algorithms::detail::blockStart;
  shm.word(r, 1).store(reinterpret_cast<uint64_t>(call.in), std::memory_order_relaxed);
  shm.word(r, 2).store(reinterpret_cast<uint64_t>(call.out), std::memory_order_relaxed);
  shm.flag(r, NodeShm::kStaged).store(g + 1, std::memory_order_release);
  waitFlags(shm, NodeShm::kStaged, g + 1, n, call, r, spin_);
  std::vector<const char*> ins(n), outs(n);
  for (int k = 0; k < n; ++k) {
    ins[k] = reinterpret_cast<const char*>(shm.word(k, 1).load(std::memory_order_relaxed));
    outs[k] = reinterpret_cast<const char*>(shm.word(k, 2).load(std::memory_order_relaxed));
  }
  // Oversubscribed, larger chunks: fewer hand-offs, each possibly a context switch.
  const size_t chunk = std::max<size_t>(1, (spin_.count() > 0 ? size_t{256} << 10 : size_t{4} << 20) / es);
  char* tmp = shm.tmp(static_cast<size_t>(n) * chunk * es);
  char* out = static_cast<char*>(call.out);
  auto sliceLo = [&](int j) { return blockStart(count, n, j); };
  auto chunks = [&](int j) { return (sliceLo(j + 1) - sliceLo(j) + chunk - 1) / chunk; };
  size_t maxChunks = 0;
  for (int j = 0; j < n; ++j) maxChunks = std::max(maxChunks, chunks(j));
  std::vector<const void*> srcs(n);
  for (size_t c = 0; c < maxChunks; ++c) {
    if (c < chunks(r)) {
      size_t lo = sliceLo(r) + c * chunk, len = std::min(chunk, sliceLo(r + 1) - lo);
      srcs[0] = static_cast<const char*>(call.in) + lo * es;  // own input first: out may alias it
      for (int k = 1; k < n; ++k) {
        int j = (r + k) % n;
        readPeer(shm.pid(j), tmp + k * chunk * es, ins[j] + lo * es, len * es, call, r);
        srcs[k] = tmp + k * chunk * es;
      }
      comm::detail::reduceMany(out + lo * es, srcs.data(), n, len, dt, op);
      if (op == ReduceOp::Avg) comm::detail::scaleForAvg(out + lo * es, len, dt, n);
      shm.flag(r, NodeShm::kReduced).store(tagBits | (c + 1), std::memory_order_release);
    }
    for (int k = 1; k < n; ++k) {
      int j = (r + k) % n;
      if (c >= chunks(j)) continue;
      waitFlag(shm, j, NodeShm::kReduced, tagBits | (c + 1), call, r, spin_);
      size_t lo = sliceLo(j) + c * chunk, len = std::min(chunk, sliceLo(j + 1) - lo);
      readPeer(shm.pid(j), out + lo * es, outs[j] + lo * es, len * es, call, r);
    }
  }
  // Nobody may return (and reuse its buffers) while a peer still reads them.
  shm.flag(r, NodeShm::kCopied).store(g + 1, std::memory_order_release);
  waitFlags(shm, NodeShm::kCopied, g + 1, n, call, r, spin_);
}

void MpiCommunicator::shmAllreduce(Call& call) {
  DTRAIN_CHECK(oneNode_, call.name(rank()), ": the shm algorithm needs every rank on one node");
  if (!shm_) shm_ = std::make_unique<NodeShm>(internal_);
  // The direct variant's data flow exactly; the staged one moves the same amount
  // slice by slice per block (rounded per block instead of once).
  auto t = comm::detail::shmTraffic(call, rank(), size());
  countSent(t.sent);
  countReceived(t.received);
  if (shm_->cma()) return cmaAllreduce(call);
  NodeShm& shm = *shm_;
  const int n = size(), r = rank();
  const size_t count = call.desc.count, es = call.elemSize();
  const DType dt = call.desc.dtype;
  const ReduceOp op = call.desc.op;
  const size_t blockElems = NodeShm::kBlockBytes / es;
  const char* in = static_cast<const char*>(call.in);
  char* out = static_cast<char*>(call.out);
  std::vector<const void*> srcs(n);
  using algorithms::detail::blockStart;
  for (size_t lo = 0; lo < count; lo += blockElems) {
    const size_t len = std::min(blockElems, count - lo);
    const uint64_t g = shm.nextBlock();
    const int buf = static_cast<int>(g & 1);
    // 1. Stage (every peer is done reading this staging buffer from block g-2).
    if (g >= 2) waitFlags(shm, NodeShm::kReduced, g - 1, n, call, r, spin_);
    std::memcpy(shm.stage(r, buf), in + lo * es, len * es);
    shm.flag(r, NodeShm::kStaged).store(g + 1, std::memory_order_release);
    // 2. Reduce this rank's slice (own staging first, as in the local backend).
    waitFlags(shm, NodeShm::kStaged, g + 1, n, call, r, spin_);
    if (g >= 2) waitFlags(shm, NodeShm::kCopied, g - 1, n, call, r, spin_);
    const size_t s0 = blockStart(len, n, r), s1 = blockStart(len, n, r + 1);
    if (s1 > s0) {
      for (int k = 0; k < n; ++k) srcs[k] = shm.stage((r + k) % n, buf) + s0 * es;
      char* res = shm.result(r, buf) + s0 * es;
      comm::detail::reduceMany(res, srcs.data(), n, s1 - s0, dt, op);
      if (op == ReduceOp::Avg) comm::detail::scaleForAvg(res, s1 - s0, dt, n);
    }
    shm.flag(r, NodeShm::kReduced).store(g + 1, std::memory_order_release);
    // 3. Gather every slice, own first (it is ready).
    for (int k = 0; k < n; ++k) {
      int j = (r + k) % n;
      if (k == 1) waitFlags(shm, NodeShm::kReduced, g + 1, n, call, r, spin_);
      size_t a = blockStart(len, n, j), b = blockStart(len, n, j + 1);
      if (b > a) std::memcpy(out + (lo + a) * es, shm.result(j, buf) + a * es, (b - a) * es);
    }
    shm.flag(r, NodeShm::kCopied).store(g + 1, std::memory_order_release);
  }
}

}  // namespace dtrain::comm::mpi
