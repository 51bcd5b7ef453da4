#include "core/Resumed.h"

#include <signal.h>

#include <atomic>
#include <mutex>

namespace dtrain::resumed {
namespace {

std::atomic<uint64_t> gContinues{0};

void onContinue(int) { gContinues.fetch_add(1, std::memory_order_relaxed); }  // async-signal-safe

void install() {
  struct sigaction current;
  if (sigaction(SIGCONT, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction sa = {};
  sa.sa_handler = onContinue;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a continued read or write goes on as if nothing happened
  sigaction(SIGCONT, &sa, nullptr);
}

}  // namespace

uint64_t count() {
  static std::once_flag once;
  std::call_once(once, install);
  return gContinues.load(std::memory_order_relaxed);
}

}  // namespace dtrain::resumed
