#pragma once
// Communicator: the contract every backend implements (rank/size, tagged
// point-to-point, the collectives, each also asynchronous, and split).
//
// Collectives take raw buffers (pointer + element count + dtype) or Tensors, and
// one Options object (reduce op, root, algorithm, tag, timeout). in == out means
// in place. Every rank of a communicator must call the same collectives in the
// same order with the same arguments; a mismatch is detected and reported with
// each rank's call instead of hanging. Every blocking call has a timeout.
//
// Threading: one thread at a time may issue calls on a communicator. Async
// collectives run in call order on the communicator's progress thread; a blocking
// collective first waits for the async ones issued before it.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/CollectiveTypes.h"
#include "comm/FlightRecorder.h"
#include "comm/Work.h"
#include "tensor/Tensor.h"

namespace dtrain::comm {

// Point-to-point channels: user messages and the layer's own traffic never match.
enum class Channel : uint8_t { User, Internal };

// One collective call as the backends and algorithms see it.
struct Call {
  CallDesc desc;
  const void* in = nullptr;
  void* out = nullptr;
  std::vector<size_t> counts;  // allgatherv: elements contributed by each rank
  Options opts;
  uint64_t seq = 0;            // per-communicator call number (errors)
  uint64_t flightToken = 0;    // its entry in the rank's flight recorder
  detail::Clock::time_point deadline;
  size_t elemSize() const { return dtypeSize(desc.dtype); }
  std::string name(int rank) const;  // "allreduce(count=..) #3 on rank 1"
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual const char* backend() const = 0;

  // Default timeout of every blocking call and Work::wait (Options::timeout overrides).
  Millis timeout() const { return timeout_; }
  // Whether collectives compare their descriptors across ranks first (default on).
  // The local backend always checks (it is part of its synchronization, at no
  // extra cost); on mpi it costs one small message exchange per collective.
  bool callChecks() const { return callChecks_; }
  void setCallChecks(bool on) { callChecks_ = on; }

  // --- Point-to-point (tag >= 0). A blocking send of a large message waits for the
  // matching receive (like MPI), so exchanges should use isend + recv.
  void send(const void* data, size_t count, DType dtype, int dst, int tag, Millis timeout = {});
  void recv(void* data, size_t count, DType dtype, int src, int tag, Millis timeout = {});
  WorkPtr isend(const void* data, size_t count, DType dtype, int dst, int tag);
  WorkPtr irecv(void* data, size_t count, DType dtype, int src, int tag);
  void send(const Tensor& t, int dst, int tag, Millis timeout = {});
  void recv(Tensor& t, int src, int tag, Millis timeout = {});

  // --- Collectives.
  // out[i] = op over ranks of in[i].
  void allreduce(const void* in, void* out, size_t count, DType dtype, const Options& opts = {});
  WorkPtr allreduceAsync(const void* in, void* out, size_t count, DType dtype,
                         const Options& opts = {});
  void allreduce(Tensor& t, const Options& opts = {});  // in place; t must be contiguous
  WorkPtr allreduceAsync(Tensor& t, const Options& opts = {});
  // data on every rank = data on opts.root.
  void broadcast(void* data, size_t count, DType dtype, const Options& opts = {});
  WorkPtr broadcastAsync(void* data, size_t count, DType dtype, const Options& opts = {});
  void broadcast(Tensor& t, const Options& opts = {});
  // out on opts.root = op over ranks of in; out is ignored (may be null) elsewhere.
  void reduce(const void* in, void* out, size_t count, DType dtype, const Options& opts = {});
  // out (size*count) = every rank's in (count), in rank order. In place when
  // in == out + rank*count.
  void allgather(const void* in, void* out, size_t count, DType dtype, const Options& opts = {});
  WorkPtr allgatherAsync(const void* in, void* out, size_t count, DType dtype,
                         const Options& opts = {});
  // Uneven allgather: rank r contributes counts[r] elements; out holds sum(counts).
  // In place when in == out + (counts[0] + ... + counts[rank-1]).
  void allgatherv(const void* in, void* out, const std::vector<size_t>& counts, DType dtype,
                  const Options& opts = {});
  // in holds size*count; out (count) on rank r = op over ranks of in[r*count, (r+1)*count).
  void reduceScatter(const void* in, void* out, size_t count, DType dtype,
                     const Options& opts = {});
  WorkPtr reduceScatterAsync(const void* in, void* out, size_t count, DType dtype,
                             const Options& opts = {});
  // in and out hold size*count; out[j*count..] on rank r = in[r*count..] of rank j.
  void alltoall(const void* in, void* out, size_t count, DType dtype, const Options& opts = {});
  void barrier(const Options& opts = {});
  WorkPtr barrierAsync(const Options& opts = {});

  // Collective: ranks with the same color form a sub-communicator, ordered by
  // (key, rank). color < 0 takes no part and gets nullptr.
  std::unique_ptr<Communicator> split(int color, int key, const Options& opts = {});

  // --- Traffic: payload bytes this rank has sent to / received from its peers so
  // far (including the hierarchical algorithm's sub-communicators and the
  // collective-mismatch checks; not MPI's or TCP's own headers). Where data moves
  // through shared memory, the bytes read out of a peer's buffers count as that
  // peer's sent and this rank's received. Safe to read from any thread.
  uint64_t bytesSent() const { return traffic_->sent.load(std::memory_order_relaxed); }
  uint64_t bytesReceived() const { return traffic_->received.load(std::memory_order_relaxed); }

  // --- The rank's flight recorder (FlightRecorder.h), shared by the
  // communicators split from this one; and this communicator's id in it.
  FlightRecorder& flightRecorder() const { return *recorder_; }
  const std::shared_ptr<FlightRecorder>& flightRecorderPtr() const { return recorder_; }
  uint32_t commId() const { return commId_; }

  // --- Used by the algorithms (src/comm/algorithms), not by applications.
  virtual WorkPtr isendBytes(const void* data, size_t bytes, int dst, int tag, Channel ch) = 0;
  virtual WorkPtr irecvBytes(void* data, size_t bytes, int src, int tag, Channel ch) = 0;
  virtual bool supports(Algorithm algo) const;
  // The algorithm Auto resolves to for an allreduce of `bytes`.
  virtual Algorithm chooseAllreduce(size_t bytes) const;
  // Auto over point-to-point messages: `ranks` ranks, `ranksPerHost` of them on
  // each host in rank order (mpirun's by-slot mapping). plan::allreduceTime
  // predicts the same choice.
  static Algorithm autoAllreduce(size_t bytes, int ranks, int ranksPerHost);
  // Ranks per group of the hierarchical algorithm when Options::groupSize is 0.
  virtual int defaultGroupSize() const;
  // Runs a collective now, on this thread (nested calls from inside algorithms).
  void runNow(Call& call);
  // Sub-communicators of the hierarchical algorithm, split on first use (a
  // collective step, executed by all ranks in the same call) and cached.
  struct HierGroups {
    std::unique_ptr<Communicator> group;    // ranks [g*groupSize, (g+1)*groupSize)
    std::unique_ptr<Communicator> leaders;  // the first rank of each group; null elsewhere
  };
  HierGroups& hierGroups(int groupSize, const Call& call);
  // Reusable scratch memory (avoids per-call allocation); slot 0..3.
  char* scratch(int slot, size_t bytes);

 protected:
  Communicator(int rank, int size, Millis timeout);
  // Backends call these where payload leaves or reaches this rank (isendBytes,
  // irecvBytes, and collectives that bypass them).
  void countSent(size_t bytes) { traffic_->sent.fetch_add(bytes, std::memory_order_relaxed); }
  void countReceived(size_t bytes) { traffic_->received.fetch_add(bytes, std::memory_order_relaxed); }
  // Compares the call's descriptor across ranks; throws with every rank's call on
  // a mismatch and TimeoutError naming the ranks that never arrived. The default
  // exchanges descriptors over the Internal channel.
  virtual void checkCall(const Call& call);
  // Whether checkCall runs for this call (local: always; others: callChecks()).
  virtual bool checksEnabled() const { return callChecks_; }
  // Moves the data. The default runs the transport-agnostic algorithms.
  virtual void execute(Call& call);
  virtual std::unique_ptr<Communicator> splitImpl(int color, int key, Call& call) = 0;
  // Derived destructors call this first: the progress thread calls virtuals.
  void stopProgressThread();
  std::string rankName() const;

 private:
  WorkPtr submit(Call call, bool async);
  Call makeCall(OpKind kind, const void* in, void* out, size_t count, DType dtype,
                const Options& opts);
  void drain();
  void progressLoop();
  // Test hook DTRAIN_TEST_SKIP_CALL (FlightRecorder.h): instead of entering
  // `call`, wait in a receive nothing answers, as a rank stuck elsewhere.
  void waitElsewhere(const Call& call);

  int rank_, size_;
  Millis timeout_;
  bool callChecks_ = true;
  std::atomic<uint64_t> nextSeq_{0};  // makeCall runs on the caller and the progress thread
  std::shared_ptr<FlightRecorder> recorder_;
  uint32_t commId_ = 1;  // the world's; a split's derives from its parent's and color
  std::map<int, HierGroups> hier_;
  std::vector<char> scratch_[4];
  // Shared with the hierarchical sub-communicators, so that their traffic counts here.
  struct Traffic {
    std::atomic<uint64_t> sent{0}, received{0};
  };
  std::shared_ptr<Traffic> traffic_ = std::make_shared<Traffic>();

  struct Pending {
    Call call;
    WorkPtr work;
  };
  std::mutex qMutex_;
  std::condition_variable qCv_;
  std::deque<Pending> queue_;
  bool busy_ = false, stop_ = false;
  std::thread progress_;
};

// Throws when `tag` is not a valid user tag.
void checkUserTag(int tag);

}  // namespace dtrain::comm
