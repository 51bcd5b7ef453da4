#pragma once
// Work: the handle of an asynchronous operation (c10d-style). It finishes either
// successfully or with an exception; wait() rethrows that exception and raises
// TimeoutError (naming the operation, this rank and the peers that never arrived)
// when the operation does not finish in time.
#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include "comm/CollectiveTypes.h"
#include "comm/detail/Wait.h"

namespace dtrain::comm {

class Work {
 public:
  // `what` names the operation in errors ("allreduce(...) on rank 2").
  Work(std::string what, Millis defaultTimeout);
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // True once finished, successfully or not. Never blocks; throws when the
  // operation can no longer finish (the world was aborted).
  bool test();
  // Blocks until finished; rethrows the failure. timeout 0 = the default
  // timeout given at creation. Throws TimeoutError on expiry (the operation is
  // cancelled where the backend can; the communicator should not be used again).
  void wait(Millis timeout = Millis{0});
  // Like wait, but returns false when `timeout` passes first, leaving the
  // operation pending (for waits that do something between slices).
  bool waitFor(Millis timeout);
  // The failure, or null (also null while still running).
  std::exception_ptr exception() const;
  bool failed() const { return state_.load(std::memory_order_acquire) == kFailed; }
  const std::string& what() const { return what_; }
  // Withdraws the operation if it has not finished (a receive that will never
  // be matched, before its buffer is released).
  void cancelIfPending() {
    if (!finished()) cancel();
  }
  // Busy-wait this long before yielding (see detail::spinTime).
  void setSpin(std::chrono::microseconds spin) { spin_ = spin; }

  // Backend side: finish the operation.
  void complete();
  void fail(std::exception_ptr error);

 protected:
  // Drives progress where completion must be polled (MPI_Test); true when done.
  virtual bool poll() { return false; }
  // True when only poll() can finish the operation (no one calls complete()).
  virtual bool polled() const { return false; }
  // Throws when the operation can no longer finish (e.g. the world was aborted).
  virtual void check() {}
  // Withdraws the operation after a timeout or abort, so that no peer writes
  // into the caller's buffer afterwards.
  virtual void cancel() {}
  // Appended to the timeout message: who never arrived.
  virtual std::string pendingDetail() const { return {}; }

  static constexpr int kPending = 0, kDone = 1, kFailed = 2;
  bool finished() const { return state_.load(std::memory_order_acquire) != kPending; }

 private:
  std::string what_;
  Millis defaultTimeout_;
  std::chrono::microseconds spin_{0};
  std::atomic<int> state_{kPending};
  std::exception_ptr error_;
  detail::Notifier notifier_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace dtrain::comm
