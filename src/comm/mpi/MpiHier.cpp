// The mpi backend's hierarchical allreduce through each host's shared segment
// (HostHier.h). Per block g of the buffer (NodeShm::kBlockBytes, double-buffered
// by parity like the `shm` allreduce):
//   1. stage: copy the input block into this rank's staging buffer;
//   2. reduce: this rank's slice of the block from every local rank's staging
//      buffer, into its result buffer;
//   3. cross: the ring between hosts on that slice, in place in the segment,
//      queued on the cross communicator's progress thread;
//   4. gather: once every local rank's slice is final, copy them all out.
// Block g's gather waits until block g+1 is reduced and its ring queued, so one
// ring is always waiting for the link while the next block is staged.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/algorithms/P2P.h"
#include "comm/detail/Check.h"
#include "comm/detail/ReduceKernels.h"
#include "comm/mpi/HostHier.h"

namespace dtrain::comm::mpi {

HostGroups::~HostGroups() {
  cross.reset();
  shm.reset();
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
}

void HostGroups::abandon() {
  (void)shm.release();
  node = MPI_COMM_NULL;
}

namespace {

using algorithms::detail::blockStart;

class HostPipeline {
 public:
  HostPipeline(HostGroups& h, Call& call, int worldSize, std::chrono::microseconds spin)
      : h_(h), shm_(*h.shm), call_(call), worldSize_(worldSize), spin_(spin),
        es_(call.elemSize()), blockElems_(NodeShm::kBlockBytes / es_),
        op_(call.desc.op == ReduceOp::Avg ? ReduceOp::Sum : call.desc.op), srcs_(h.localSize) {}

  void run() {
    const size_t count = call_.desc.count;
    const size_t blocks = (count + blockElems_ - 1) / blockElems_;
    for (size_t b = 0; b < blocks; ++b) {
      const size_t lo = b * blockElems_;
      Block& cur = inFlight_[b % 2];
      cur = {lo, std::min(blockElems_, count - lo), shm_.nextBlock(), nullptr};
      stageAndReduce(cur);
      if (b > 0) gather(inFlight_[(b - 1) % 2]);
    }
    if (blocks > 0) gather(inFlight_[(blocks - 1) % 2]);
  }

 private:
  struct Block {
    size_t lo = 0, len = 0;
    uint64_t g = 0;
    WorkPtr crossing;  // the ring between hosts on this rank's slice
  };

  int buf(const Block& b) const { return static_cast<int>(b.g & 1); }
  size_t sliceLo(const Block& b, int k) const { return blockStart(b.len, h_.localSize, k); }
  size_t sliceLen(const Block& b, int k) const { return sliceLo(b, k + 1) - sliceLo(b, k); }
  char* result(const Block& b, int k) { return shm_.result(k, buf(b)) + sliceLo(b, k) * es_; }
  void waitAll(NodeShm::Flag f, uint64_t want) {
    waitShmFlags(shm_, f, want, 0, h_.localSize, call_, h_.localRank, spin_);
  }
  void publish(NodeShm::Flag f, const Block& b) {
    shm_.flag(h_.localRank, f).store(b.g + 1, std::memory_order_release);
  }

  void stageAndReduce(Block& b) {
    const int me = h_.localRank, n = h_.localSize;
    // Buffers of block g-2 are free once every local rank read them.
    if (b.g >= 2) waitAll(NodeShm::kReduced, b.g - 1);
    std::memcpy(shm_.stage(me, buf(b)), static_cast<const char*>(call_.in) + b.lo * es_, b.len * es_);
    publish(NodeShm::kStaged, b);
    waitAll(NodeShm::kStaged, b.g + 1);
    if (b.g >= 2) waitAll(NodeShm::kCopied, b.g - 1);
    const size_t len = sliceLen(b, me);
    if (len) {
      for (int k = 0; k < n; ++k) srcs_[k] = shm_.stage((me + k) % n, buf(b)) + sliceLo(b, me) * es_;
      comm::detail::reduceMany(result(b, me), srcs_.data(), n, len, call_.desc.dtype, op_);
    }
    publish(NodeShm::kReduced, b);
    if (len && h_.cross->size() > 1) {
      Options o{.op = op_, .algo = Algorithm::Auto, .timeout = comm::detail::remaining(call_)};
      b.crossing = h_.cross->allreduceAsync(result(b, me), result(b, me), len, call_.desc.dtype, o);
    }
  }

  void gather(Block& b) {
    const int me = h_.localRank, n = h_.localSize;
    if (b.crossing) b.crossing->wait(comm::detail::remaining(call_));
    b.crossing.reset();
    if (call_.desc.op == ReduceOp::Avg && sliceLen(b, me))
      comm::detail::scaleForAvg(result(b, me), sliceLen(b, me), call_.desc.dtype, worldSize_);
    publish(NodeShm::kCrossed, b);
    char* out = static_cast<char*>(call_.out) + b.lo * es_;
    for (int k = 0; k < n; ++k) {
      const int j = (me + k) % n;  // own slice first: it is final already
      if (k == 1) waitAll(NodeShm::kCrossed, b.g + 1);
      if (sliceLen(b, j)) std::memcpy(out + sliceLo(b, j) * es_, result(b, j), sliceLen(b, j) * es_);
    }
    publish(NodeShm::kCopied, b);
  }

  HostGroups& h_;
  NodeShm& shm_;
  Call& call_;
  const int worldSize_;
  const std::chrono::microseconds spin_;
  const size_t es_, blockElems_;
  const ReduceOp op_;
  std::vector<const void*> srcs_;
  Block inFlight_[2];
};

}  // namespace

void hostAllreduce(HostGroups& hosts, Call& call, int worldSize, std::chrono::microseconds spin) {
  HostPipeline(hosts, call, worldSize, spin).run();
}

}  // namespace dtrain::comm::mpi
