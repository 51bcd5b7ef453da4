#include "comm/Work.h"

#include "core/Error.h"

namespace dtrain::comm {

Work::Work(std::string what, Millis defaultTimeout)
    : what_(std::move(what)), defaultTimeout_(defaultTimeout) {}

bool Work::test() {
  if (finished()) return true;
  if (poll() || finished()) return true;
  check();  // an aborted world fails pollers too, not only waiters
  return false;
}

void Work::wait(Millis timeout) {
  if (timeout.count() <= 0) timeout = defaultTimeout_;
  auto ready = [this] { return finished() || poll(); };
  try {
    bool ok = detail::waitUntil(ready, detail::deadlineAfter(timeout), [this] { check(); },
                                polled() ? nullptr : &notifier_, spin_);
    if (!ok) {
      cancel();
      std::string detail = pendingDetail();
      throw TimeoutError(dtrain::detail::concat(what_, ": timed out after ", timeout.count(),
                                                " ms", detail.empty() ? "" : ": ", detail));
    }
  } catch (const PeerSilentError&) {
    if (!finished()) cancel();
    throw;
  } catch (const TimeoutError&) {
    throw;  // cancelled above
  } catch (...) {
    if (!finished()) cancel();
    throw;
  }
  if (state_.load(std::memory_order_acquire) == kFailed) std::rethrow_exception(error_);
}

bool Work::waitFor(Millis timeout) {
  auto ready = [this] { return finished() || poll(); };
  bool ok = detail::waitUntil(ready, detail::deadlineAfter(timeout), [this] { check(); },
                              polled() ? nullptr : &notifier_, spin_);
  if (!ok) return false;
  if (state_.load(std::memory_order_acquire) == kFailed) std::rethrow_exception(error_);
  return true;
}

std::exception_ptr Work::exception() const {
  return state_.load(std::memory_order_acquire) == kFailed ? error_ : nullptr;
}

void Work::complete() {
  state_.store(kDone, std::memory_order_release);
  notifier_.notify();
}

void Work::fail(std::exception_ptr error) {
  error_ = std::move(error);
  state_.store(kFailed, std::memory_order_release);
  notifier_.notify();
}

}  // namespace dtrain::comm
