#pragma once
// When a run hangs: every reachable rank writes its flight recorder
// (FLIGHT_DIR/flight-rank<R>.json, see flight::setDumpDir) and one rank prints
// the diagnosis (HangDiagnosis.h) on stderr, as "dtrain: hang: ...". Three
// triggers: a wait that times out (--call-timeout, or --comm-timeout's silent
// peer), the mpi watchdog's abort, and SIGUSR2 (a look at a run that seems
// stuck; it goes on).
//
// Where the other ranks' states come from: in one process (the local backend)
// every rank's recorder is at hand. Across processes (mpi) they travel in the
// heartbeats (Liveness.h): each beat carries its sender's FlightState, so a
// peer that is stopped or cut off is still described as of its last beat, which
// no request sent at the time of the hang could get; the beats also carry a
// request to dump, which every live peer answers by writing its file.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/FlightRecorder.h"

namespace dtrain::comm::flight {

// Turns the reports on for this process (the trainer does; a program that uses
// the communicators alone gets no files), writing into `dir` (empty: the working
// directory), and installs the SIGUSR2 handler. Each call starts a new run: its
// hang is reported again.
void enableReports(const std::string& dir);
void disableReports();
bool reportsEnabled();

// A rank's top-level recorder, made by its world communicator (weakly held).
void track(const std::shared_ptr<FlightRecorder>& recorder);

// Where the diagnosis gets every rank's state, and how this process asks the
// others to dump theirs (mpi: the heartbeat; none set: this process's recorders).
struct PeerView {
  std::function<std::vector<FlightState>()> states;
  // Asks every live peer to dump, waits (bounded) until they say they did.
  std::function<void()> requestDumps;
  // Whether this process is the one to print: for a hang, the lowest rank that
  // waits and is alive; for SIGUSR2, rank 0.
  std::function<bool(const std::vector<FlightState>&, bool onSignal)> prints;
};
void setPeerView(PeerView view);
void clearPeerView();

// This process's recorders, dumped; returns the directory they went to.
std::string dumpOwn();
// The diagnosis from what this process knows.
std::string diagnose();
// Dumps this process's recorders, asks the others to dump theirs and prints the
// diagnosis when this process is the one to. Safe to call from several
// threads; a hang is reported once per process.
// `onSignal`: SIGUSR2 asked (reported every time, the run goes on).
void reportHang(bool onSignal = false);

// SIGUSR2: the same report, as often as it is sent, the run going on (the
// handler only posts to a thread; installed by enableReports).
void installDumpSignal();

}  // namespace dtrain::comm::flight
