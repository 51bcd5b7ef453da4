#include "core/StopSignal.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>

namespace dtrain::stop {
namespace {

std::atomic<int> gSignal{0};     // the first signal's number, 0 while none came
std::atomic<int> gRequested{0};  // request()'s signal (a peer's vote, a stop file), 0 while none
std::atomic<int> gScopes{0};
// The signals that stop a run cleanly. SIGUSR1 is what a batch system sends
// ahead of a time limit or preemption (SLURM's --signal=USR1@60), where its
// default action would kill the job without a checkpoint.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};
struct sigaction gPrevious[std::size(kStopSignals)];
std::mutex gRecordMutex;
Stopped gRecord;

// When the first signal came (CLOCK_MONOTONIC, ns), 0 while none came.
std::atomic<int64_t> gFirstAtNs{0};
// The same signal again this soon is one stop delivered twice, not a second
// Ctrl-C: SLURM signals every process of a job (scancel, the time limit) and
// mpirun, which gets it too, passes it on to its ranks as well.
constexpr int64_t kDuplicateWindowNs = 1'000'000'000;

int64_t monotonicNs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// Async-signal-safe: atomic exchanges, and on a second signal write + _exit.
void onSignal(int sig) {
  const int64_t now = monotonicNs();
  int64_t unset = 0;
  gFirstAtNs.compare_exchange_strong(unset, now);
  int first = 0;
  if (gSignal.compare_exchange_strong(first, sig)) return;
  if (first == sig && now - gFirstAtNs.load() < kDuplicateWindowNs) return;
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
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &sa, &gPrevious[i]);
}

SignalScope::~SignalScope() {
  if (gScopes.fetch_sub(1) > 1) return;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &gPrevious[i], nullptr);
}

bool requested() {
  return gSignal.load(std::memory_order_relaxed) != 0 || gRequested.load(std::memory_order_relaxed) != 0;
}

int signalNumber() {
  const int sig = gSignal.load();
  return sig ? sig : gRequested.load();
}

int receivedSignal() { return gSignal.load(); }

// Kept apart from gSignal: a signal that arrives after a peer's vote (mpirun or
// srun forwards it to every rank, not all at once) is this process's first,
// not a second one that ends it without its part of the checkpoint; and it then
// names the signal in the line and the exit code.
void request(int sig) {
  int none = 0;
  gRequested.compare_exchange_strong(none, sig);
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

const char* signalName() {
  switch (signalNumber()) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "SIGINT";
  }
}

void clear() {
  gSignal = 0;
  gFirstAtNs = 0;
  gRequested = 0;
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
