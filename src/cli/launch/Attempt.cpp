#include "cli/launch/Attempt.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "cli/launch/Process.h"
#include "core/Error.h"

namespace dtrain::cli::launch {

namespace fs = std::filesystem;

namespace {

int64_t readAttemptProgress(const fs::path& file) {
  std::ifstream in(file);
  long long step = -1;
  if (in >> step) return step;
  return -1;
}

std::vector<std::string> mpirunCommand(const AttemptSpec& s) {
  const int64_t workers = workersOf(s.hosts);
  // Each rank's exit code and time go to exit.<rank>: the first rank that ended
  // on its own with an error points at the host that was lost.
  const std::string record =
      "d=\"$1\"; shift; \"$@\"; rc=$?; [ \"$rc\" -ne 0 ] && "
      "echo \"$rc $(date +%s.%N)\" > \"$d/exit.${OMPI_COMM_WORLD_RANK:-x}\"; exit $rc";
  std::vector<std::string> cmd;
  if (!s.netsim.empty()) {
    cmd = {"bash", s.netsim, "mpirun", "-np", std::to_string(workers), "--ranks-per-host",
           std::to_string(s.ranksPerHost), "--hosts", hostList(s.hosts), "--"};
  } else {
    std::string spec;
    for (const auto& h : s.hosts) spec += (spec.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
    cmd = {"mpirun", "--allow-run-as-root", "-np", std::to_string(workers), "--host", spec,
           "--map-by", "slot", "--bind-to", "none"};
  }
  cmd.insert(cmd.end(), {"sh", "-c", record, "sh", s.dir.string(), "env",
                         "DTRAIN_LAUNCH_PROGRESS=" + (s.dir / "progress").string(),
                         "DTRAIN_LAUNCH_STOP=" + (s.dir / "stop").string()});
  if (s.index == 0) {
    // The fault-injection hook fires in the first attempt only (a lost host stays lost).
    for (const char* v : {"DTRAIN_TEST_DIE_AT_STEP", "DTRAIN_TEST_DIE_RANK"})
      if (const char* e = std::getenv(v)) cmd.push_back(std::string(v) + "=" + e);
  } else {
    cmd.insert(cmd.end(), {"DTRAIN_TEST_DIE_AT_STEP=", "DTRAIN_TEST_DIE_RANK="});
  }
  cmd.push_back(selfExe());
  cmd.push_back("train");
  cmd.insert(cmd.end(), s.trainArgs.begin(), s.trainArgs.end());
  return cmd;
}

}  // namespace

AttemptResult runAttempt(const AttemptSpec& spec, const AttemptWatch& watch) {
  using Clock = std::chrono::steady_clock;
  fs::remove_all(spec.dir);
  fs::create_directories(spec.dir);
  auto cmd = mpirunCommand(spec);
  int out[2];
  if (::pipe(out) != 0) throw Error("launch: pipe failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("launch: fork failed");
  if (pid == 0) {
    // A group of its own: a job whose mpirun hangs is killed whole (killpg).
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    auto argv = argvOf(cmd);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "dtrain: launch: cannot run %s\n", argv[0]);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever runs first
  ::close(out[1]);
  AttemptResult a;
  std::string pending;
  auto takeLines = [&] {
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      const std::string line = pending.substr(0, nl);
      if (!line.empty() && line[0] == '{') a.resultLine = line;
      else std::fprintf(stderr, "%s\n", line.c_str());
    }
  };
  const fs::path progress = spec.dir / "progress";
  int64_t seen = -1;
  int status = 0;
  bool exited = false, killed = false, signalled = false;
  Clock::time_point stopAskedAt{};
  auto nextRecordCheck = Clock::now();
  std::optional<Clock::time_point> failingSince;
  for (bool open = true; open && !exited;) {
    // Stopping the job: the stop file makes the ranks stop after a step with a
    // checkpoint (runtime/LaunchHooks.h). A job that does not read it (stuck
    // before its first step) gets SIGTERM after a while: mpirun then ends it.
    if (!a.stopAsked && watch.shouldStop && watch.shouldStop()) {
      std::ofstream(spec.dir / "stop") << "stop\n";
      a.stopAsked = true;
      stopAskedAt = Clock::now();
    }
    if (a.stopAsked && !signalled && Clock::now() - stopAskedAt > std::chrono::seconds(kStopGraceS)) {
      ::kill(pid, SIGTERM);
      signalled = true;
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      char buf[4096];
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) open = false;
      else pending.append(buf, static_cast<size_t>(n));
      takeLines();
    }
    const int64_t step = readAttemptProgress(progress);
    if (step > seen) {
      seen = step;
      if (watch.progressed) watch.progressed(step);
    }
    // mpirun gone: done, even when a process it left (a daemon on a host that
    // cannot be reached) still holds the pipe open.
    if (::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    // A rank ended with an error, so the job is failing: mpirun aborts the rest.
    // When it cannot reach a host (its link is down) it can wait for that
    // host's daemon for ever: after a grace the whole job is killed.
    if (!exited && !killed && Clock::now() >= nextRecordCheck) {
      nextRecordCheck = Clock::now() + std::chrono::milliseconds(500);
      if (!failingSince && firstFailedRank(spec.dir)) failingSince = Clock::now();
      if (failingSince && Clock::now() - *failingSince > std::chrono::seconds(kMpirunGraceS)) {
        std::fprintf(stderr, "dtrain: launch: mpirun did not end %d s after a rank failed: killing the job\n",
                     kMpirunGraceS);
        ::kill(-pid, SIGKILL);
        killed = true;
      }
    }
  }
  // What is left in the pipe (without waiting for a leftover holder of it).
  for (pollfd p{out[0], POLLIN, 0}; ::poll(&p, 1, 0) > 0;) {
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
  }
  takeLines();
  ::close(out[0]);
  if (!exited)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  a.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  a.lastStep = readAttemptProgress(progress);
  return a;
}

std::optional<FailedRank> firstFailedRank(const fs::path& attemptDir) {
  double first = 0;
  std::optional<FailedRank> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(attemptDir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("exit.", 0) != 0) continue;
    std::ifstream in(e.path());
    int code = 0;
    double at = 0;
    if (!(in >> code >> at)) continue;
    int rank = -1;
    try {
      rank = std::stoi(n.substr(5));
    } catch (const std::logic_error&) {
      continue;
    }
    if (!found || at < first) first = at, found = FailedRank{rank, code};
  }
  return found;
}

int hostOfRank(const std::vector<LaunchHost>& hosts, int rank) {
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (rank >= 0 && rank < hosts[i].slots) return static_cast<int>(i);
    rank -= hosts[i].slots;
  }
  return -1;
}

}  // namespace dtrain::cli::launch
