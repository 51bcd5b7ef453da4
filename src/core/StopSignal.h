#pragma once
// A clean stop on Ctrl-C (SIGINT), SIGTERM or SIGUSR1 (a batch system's warning
// before a time limit or preemption): the first signal only sets a
// process-wide flag, which the training loop reads between steps (every rank
// agrees on the step to stop at, saves a checkpoint and leaves); a second signal
// ends the process at once (exit 128 + signal, without cleaning up), unless it
// is the same signal within a second (one stop delivered twice: a batch system
// signals every process of a job, and mpirun forwards it to the ranks too).
// The flag is shared by every thread, so the ranks of the local backend (threads)
// see it together; under mpirun each process has its own and the ranks agree
// through Strategy::anyRankStops.
#include <cstdint>
#include <string>

#include "core/Error.h"

namespace dtrain::stop {

// A run that stopped on a signal without saving (a strategy that cannot agree on
// a step, e.g. parameter servers): the CLI prints the message and exits 128 +
// the signal; Python raises KeyboardInterrupt.
class Interrupted : public Error {
 public:
  explicit Interrupted(const std::string& msg) : Error(msg) {}
};

// Installs the handlers for SIGINT, SIGTERM and SIGUSR1 while it lives and puts back the
// ones it found (Python's, the default) when it goes; clears the flag on entry.
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
};

// True once a stop was asked for (a signal, or request()).
bool requested();
// The signal that asked (SIGINT, SIGTERM, SIGUSR1): the first one this process
// received, else request()'s (SIGINT when it named none); 0 when none.
int signalNumber();
// The signal this process itself received first (not a request()), 0 when none.
int receivedSignal();
// Asks for a stop as the first signal would (a rank that learnt from its peers
// that they stop; dtrain launch's stop file; tests). A signal that comes after
// it still counts as the first: it names the stop, and does not end the process.
void request(int signalNumber = 2);

// What the training loop did with the request: the step it stopped after and the
// checkpoint it wrote ("" when none). Set on every rank that stopped early.
struct Stopped {
  bool stopped = false;
  int64_t step = 0;
  std::string checkpoint;
  bool reporter = false;  // the rank that prints the line
};
void recordStop(const Stopped& s);
Stopped stopped();
// The line to print: "stopped by SIGINT after step 37: checkpoint D/step-...".
std::string describe(const Stopped& s);
// 128 + the signal when the run stopped early on one (130 for SIGINT, 143 for
// SIGTERM, 138 for SIGUSR1) in the reporter's process, else 0 (an mpi run's other ranks: mpirun
// returns the reporter's code).
int exitCode();
// 128 + the signal that asked (130 when none did).
int signalExitCode();
// "SIGINT", "SIGTERM" or "SIGUSR1".
const char* signalName();
// Forgets the request and the record (the next run in this process starts clean).
void clear();

// Test hook: DTRAIN_STOP_AT_STEP=k raises SIGINT in this process after step k
// (on the rank that calls it with reporter true), as a Ctrl-C at that moment would.
void raiseAtStepForTests(int64_t step, bool reporter);

}  // namespace dtrain::stop
