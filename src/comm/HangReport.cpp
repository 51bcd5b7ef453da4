#include "comm/HangReport.h"

#include <semaphore.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "comm/HangDiagnosis.h"

namespace dtrain::comm::flight {

namespace {

std::mutex gMutex;
std::vector<std::weak_ptr<FlightRecorder>> gTracked;  // under gMutex
PeerView gView;                                      // under gMutex
std::atomic<bool> gEnabled{false}, gReported{false};
std::mutex gReportMutex;  // one report at a time

// The latest live recorder of each rank in this process.
std::vector<std::shared_ptr<FlightRecorder>> liveRecorders() {
  std::lock_guard<std::mutex> lock(gMutex);
  std::map<int, std::shared_ptr<FlightRecorder>> byRank;
  for (const auto& w : gTracked)
    if (auto r = w.lock()) byRank[r->rank()] = r;
  std::vector<std::shared_ptr<FlightRecorder>> out;
  for (auto& [rank, r] : byRank) out.push_back(r);
  return out;
}

PeerView view() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gView;
}

std::vector<FlightState> localStates() {
  std::vector<FlightState> out;
  for (const auto& r : liveRecorders()) {
    const FlightState s = r->state();
    if (s.rank >= static_cast<int>(out.size())) out.resize(s.rank + 1);
    out[s.rank] = s;
  }
  for (size_t r = 0; r < out.size(); ++r) out[r].rank = static_cast<int>(r);
  return out;
}

sem_t gSignalSem;
void onDumpSignal(int) { sem_post(&gSignalSem); }  // async-signal-safe

}  // namespace

void enableReports(const std::string& dir) {
  setDumpDir(dir);
  gReported = false;
  gEnabled = true;
  installDumpSignal();
}

void disableReports() { gEnabled = false; }

bool reportsEnabled() { return gEnabled.load(); }

void track(const std::shared_ptr<FlightRecorder>& recorder) {
  std::lock_guard<std::mutex> lock(gMutex);
  std::erase_if(gTracked, [](const std::weak_ptr<FlightRecorder>& w) { return w.expired(); });
  gTracked.push_back(recorder);
}

void setPeerView(PeerView v) {
  std::lock_guard<std::mutex> lock(gMutex);
  gView = std::move(v);
}

void clearPeerView() { setPeerView({}); }

std::string dumpOwn() {
  for (const auto& r : liveRecorders()) dump(*r);
  const std::string dir = dumpDir();
  return dir.empty() ? "." : dir;
}

std::string diagnose() {
  const PeerView v = view();
  return diagnoseHang(v.states ? v.states() : localStates());
}

void reportHang(bool onSignal) {
  if (!gEnabled.load()) return;
  // Locked first: another rank of this process that times out meanwhile waits
  // here, its call still open, instead of unwinding under the report.
  std::lock_guard<std::mutex> lock(gReportMutex);
  if (!onSignal && gReported.exchange(true)) return;
  const PeerView v = view();
  std::vector<FlightState> states = v.states ? std::vector<FlightState>{} : localStates();
  const std::string dir = dumpOwn();
  if (v.requestDumps) v.requestDumps();
  if (v.states) states = v.states();  // after the answers: the peers' latest beats
  std::string diagnosis = diagnoseHang(states);
  if (diagnosis.empty() && !onSignal) return;  // e.g. a wait inside MPI's own setup
  if (v.prints && !v.prints(states, onSignal)) return;
  if (diagnosis.empty()) diagnosis = "no rank waits in a call";
  const char* what = onSignal ? "SIGUSR2" : "hang";
  std::fprintf(stderr, "dtrain: %s: %s\ndtrain: %s: each rank's last %d calls: %s/flight-rank<R>.json\n",
               what, diagnosis.c_str(), what, kFlightEntries, dir.c_str());
  std::fflush(stderr);
}

void installDumpSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    sem_init(&gSignalSem, 0, 0);
    std::thread([] {
      for (;;) {
        if (sem_wait(&gSignalSem) != 0) continue;  // EINTR
        reportHang(true);
      }
    }).detach();
    struct sigaction sa = {};
    sa.sa_handler = onDumpSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, nullptr);
  });
}

}  // namespace dtrain::comm::flight
