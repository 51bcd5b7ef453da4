#include "runtime/LaunchHooks.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "core/StopSignal.h"

namespace dtrain::runtime {

namespace {

int progressFd() {
  static const int fd = [] {
    const char* path = std::getenv("DTRAIN_LAUNCH_PROGRESS");
    return path && *path ? ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
  }();
  return fd;
}

}  // namespace

void afterStepForLaunch(int64_t step, int rank, bool reporter) {
  if (reporter && progressFd() >= 0) {
    // Fixed width, so a shorter number never leaves digits of a longer one behind.
    char line[32];
    const int n = std::snprintf(line, sizeof line, "%20lld\n", static_cast<long long>(step));
    if (::pwrite(progressFd(), line, static_cast<size_t>(n), 0) < 0) {
      // Progress is advisory: the launcher then reports fewer figures, training goes on.
    }
  }
  // A stop asked by the launcher (a host to take back): the same clean stop as
  // SIGTERM, decided by the reporter; the training loop's stop vote follows
  // right after this hook, so every rank stops after this step and the
  // checkpoint is written. Looked for at most every 200 ms (a stat on a
  // directory every host sees).
  static const char* stopFile = [] {
    const char* p = std::getenv("DTRAIN_LAUNCH_STOP");
    return p && *p ? p : nullptr;
  }();
  if (reporter && stopFile && !stop::requested()) {
    using LaunchClock = std::chrono::steady_clock;
    static LaunchClock::time_point nextLook{};
    if (LaunchClock::now() >= nextLook) {
      nextLook = LaunchClock::now() + std::chrono::milliseconds(200);
      if (::access(stopFile, F_OK) == 0) stop::request(SIGTERM);
    }
  }
  static const int64_t dieAt = [] {
    const char* s = std::getenv("DTRAIN_TEST_DIE_AT_STEP");
    return s ? std::atoll(s) : int64_t{-1};
  }();
  static const int dieRank = [] {
    const char* s = std::getenv("DTRAIN_TEST_DIE_RANK");
    return s ? std::atoi(s) : -1;
  }();
  static const std::pair<int, int64_t> stopAt = [] {
    const char* s = std::getenv("DTRAIN_TEST_STOP_AT_STEP");
    int r = -1;
    long long k = -1;
    if (!s || std::sscanf(s, "%d:%lld", &r, &k) != 2) return std::pair<int, int64_t>{-1, -1};
    return std::pair<int, int64_t>{r, k};
  }();
  if (rank == stopAt.first && step == stopAt.second) {
    // A rank that stops has been beating for a while: give the heartbeat (a
    // beat every <= 1 s) time to carry this step's state before the whole
    // process, the heartbeat too, stops; a run of a few steps is over sooner.
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    std::raise(SIGSTOP);
  }
  if (step == dieAt && rank == dieRank) {
    std::fprintf(stderr, "dtrain: rank %d: DTRAIN_TEST_DIE_AT_STEP=%lld: exiting as a lost host\n",
                 rank, static_cast<long long>(step));
    std::fflush(stderr);
    ::_exit(9);
  }
}

}  // namespace dtrain::runtime
