#include "core/StopSignal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dtrain::stop {
namespace {

std::atomic<int> gSignal{0};    // the first signal's number, 0 while none came
std::atomic<int> gScopes{0};
struct sigaction gPreviousInt, gPreviousTerm;
std::mutex gRecordMutex;
Stopped gRecord;

// Async-signal-safe: an atomic exchange, and on the second signal write + _exit.
void onSignal(int sig) {
  int none = 0;
  if (gSignal.compare_exchange_strong(none, sig)) return;
  static const char kLine[] = "dtrain: second signal: stopping now, without a checkpoint\n";
  ssize_t ignored = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
  (void)ignored;
  ::_exit(128 + sig);
}

}  // namespace

SignalScope::SignalScope() {
  if (gScopes.fetch_add(1) > 0) return;  // nested (Python calling into a run): one install
  clear();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking reads and sleeps go on; the loop polls the flag
  sigaction(SIGINT, &sa, &gPreviousInt);
  sigaction(SIGTERM, &sa, &gPreviousTerm);
}

SignalScope::~SignalScope() {
  if (gScopes.fetch_sub(1) > 1) return;
  sigaction(SIGINT, &gPreviousInt, nullptr);
  sigaction(SIGTERM, &gPreviousTerm, nullptr);
}

bool requested() { return gSignal.load(std::memory_order_relaxed) != 0; }
int signalNumber() { return gSignal.load(); }

void request(int sig) {
  int none = 0;
  gSignal.compare_exchange_strong(none, sig);
}

void recordStop(const Stopped& s) {
  std::lock_guard<std::mutex> lock(gRecordMutex);
  // Several ranks of one process (threads) stop: the reporter's record is the one to print.
  if (!gRecord.stopped || s.reporter) gRecord = s;
  gRecord.stopped = true;
}

std::string describe(const Stopped& s) {
  std::string line = std::string("stopped by ") + signalName() + " after step " + std::to_string(s.step);
  if (s.checkpoint.empty())
    return line + "; nothing saved (--checkpoint-dir or --save keep the progress)";
  const bool inDir = s.checkpoint.find("/step-") != std::string::npos ||
                     s.checkpoint.rfind("step-", 0) == 0;
  return line + ": checkpoint " + s.checkpoint +
         (inDir ? " (go on with --resume auto)" : " (go on with --resume " + s.checkpoint + ")");
}

Stopped stopped() {
  std::lock_guard<std::mutex> lock(gRecordMutex);
  return gRecord;
}

int exitCode() {
  // Only the reporter's process exits 128 + the signal. Under mpirun a rank
  // that exits non-zero makes mpirun kill the others at once, and a rank done
  // first would kill the reporter before it says where the checkpoint is (its
  // line comes after MPI_Finalize). The other ranks have saved their part of
  // the agreed stop and exit 0; mpirun returns the reporter's code.
  const Stopped s = stopped();
  return s.stopped && s.reporter ? signalExitCode() : 0;
}

int signalExitCode() {
  const int sig = signalNumber();
  return 128 + (sig ? sig : SIGINT);
}

const char* signalName() { return signalNumber() == SIGTERM ? "SIGTERM" : "SIGINT"; }

void clear() {
  gSignal = 0;
  std::lock_guard<std::mutex> lock(gRecordMutex);
  gRecord = {};
}

void raiseAtStepForTests(int64_t step, bool reporter) {
  static const int64_t at = [] {
    const char* s = std::getenv("DTRAIN_STOP_AT_STEP");
    return s ? std::atoll(s) : int64_t{-1};
  }();
  if (reporter && step == at) std::raise(SIGINT);
}

}  // namespace dtrain::stop
