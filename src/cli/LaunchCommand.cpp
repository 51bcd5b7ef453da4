#include "cli/LaunchCommand.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/Error.h"
#include "core/StopSignal.h"

namespace dtrain::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct LaunchFlags {
  int netsim = 0;
  std::string rate = "1gbit";
  std::string hosts;
  std::string hostfile;
  int minHosts = 1;
  int maxRestarts = 3;
  int ranksPerHost = 1;
  std::vector<std::string> train;  // after `--`: train ARGS...
};

struct LaunchHost {
  std::string name;  // netsim: the host number
  int slots = 1;
};

// ---- the train arguments --------------------------------------------------

// The value of --name (as "--name V" or "--name=V"), the last one given.
std::optional<std::string> launchFlagValue(const std::vector<std::string>& args, const std::string& name) {
  std::optional<std::string> v;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) v = args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) v = args[i].substr(name.size() + 1);
  }
  return v;
}

std::vector<std::string> launchDropFlag(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind(name + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int64_t launchIntFlag(const std::vector<std::string>& args, const std::string& name, int64_t fallback) {
  const auto v = launchFlagValue(args, name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long long n = std::stoll(*v, &used);
    DTRAIN_CHECK_USAGE(used == v->size() && n >= 0, "launch: ", name, " takes a number (got '", *v, "')");
    return n;
  } catch (const std::logic_error&) {
    throw UsageError("launch: " + name + " takes a number (got '" + *v + "')");
  }
}

// Per-rank batch and accumulation that keep workers x batch x accumulate at the
// global batch: the batch scaled when it divides, else the accumulation.
struct BatchPlan {
  int64_t batch = 0, accumulate = 0;
};
std::optional<BatchPlan> planBatch(int64_t global, int64_t workers, int64_t batch0, int64_t acc0) {
  if (global % (workers * acc0) == 0) return BatchPlan{global / (workers * acc0), acc0};
  if (global % (workers * batch0) == 0) return BatchPlan{batch0, global / (workers * batch0)};
  return std::nullopt;
}

// ---- processes -------------------------------------------------------------

std::vector<char*> launchArgv(std::vector<std::string>& args) {
  std::vector<char*> v;
  for (auto& a : args) v.push_back(a.data());
  v.push_back(nullptr);
  return v;
}

// Runs a helper command with its stdout on our stderr (stdout carries only the result line).
int runToStderr(std::vector<std::string> args, bool quiet = false) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("launch: fork failed");
  if (pid == 0) {
    ::dup2(2, 1);
    if (quiet) {
      std::FILE* null = std::fopen("/dev/null", "w");
      if (null) ::dup2(::fileno(null), 1), ::dup2(::fileno(null), 2);
    }
    auto argv = launchArgv(args);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string launchSelfExe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("dtrain") : p.string();
}

std::string netsimScript() {
  if (const char* s = std::getenv("DTRAIN_NETSIM_SH"); s && *s) return s;
#ifdef DTRAIN_SOURCE_DIR
  if (fs::exists(DTRAIN_SOURCE_DIR "/scripts/netsim.sh")) return DTRAIN_SOURCE_DIR "/scripts/netsim.sh";
#endif
  throw UsageError("launch --netsim: scripts/netsim.sh not found; set DTRAIN_NETSIM_SH=PATH");
}

double launchSeconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double wallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t readProgress(const fs::path& file) {
  std::ifstream in(file);
  long long step = -1;
  if (in >> step) return step;
  return -1;
}

// The newest periodic checkpoint's step (step-<N>.safetensors), -1 when none;
// train's --resume auto picks it (or the one before when it does not read back whole).
int64_t newestCheckpointStep(const fs::path& dir) {
  int64_t best = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) != 0 || e.path().extension() != ".safetensors") continue;
    try {
      best = std::max<int64_t>(best, std::stoll(n.substr(5)));
    } catch (const std::logic_error&) {
    }
  }
  return best;
}

std::string hostList(const std::vector<LaunchHost>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += (s.empty() ? "" : ",") + h.name;
  return s;
}

// ---- the launcher ----------------------------------------------------------

class Launcher {
 public:
  explicit Launcher(const LaunchFlags& f) : f_(f) {}

  void run();

 private:
  struct Attempt {
    int exitCode = 0;
    int64_t lastStep = -1;
    std::string resultLine;
  };

  std::vector<LaunchHost> parseHosts() const;
  std::vector<std::string> trainArgs(int64_t workers) const;
  Attempt runAttempt(int attempt, int64_t resumeStep);
  std::vector<size_t> lostHosts(const fs::path& attemptDir, std::string& how);
  void log(nlohmann::json record);

  const LaunchFlags& f_;
  std::vector<LaunchHost> hosts_;
  std::vector<std::string> train_;  // the user's train arguments, without `train`
  fs::path dir_;
  int64_t global_ = 0, batch0_ = 0, acc0_ = 0;
  std::string netsim_;
  std::ofstream log_;
  // Recovery bookkeeping of the attempt being run.
  std::optional<Clock::time_point> failedAt_;
  double secondsToRecover_ = 0;
};

std::vector<LaunchHost> Launcher::parseHosts() const {
  std::vector<LaunchHost> hosts;
  const int given = (f_.netsim > 0) + !f_.hosts.empty() + !f_.hostfile.empty();
  DTRAIN_CHECK_USAGE(given == 1, "launch needs exactly one of --netsim N, --hosts H1:R,H2:R,... or --hostfile F");
  auto add = [&](const std::string& spec) {
    LaunchHost h;
    const auto colon = spec.find(':');
    h.name = spec.substr(0, colon);
    h.slots = f_.ranksPerHost;
    if (colon != std::string::npos) {
      try {
        h.slots = std::stoi(spec.substr(colon + 1));
      } catch (const std::logic_error&) {
        h.slots = 0;
      }
    }
    DTRAIN_CHECK_USAGE(!h.name.empty() && h.slots >= 1, "launch: bad host '", spec, "' (use NAME or NAME:RANKS)");
    hosts.push_back(h);
  };
  if (f_.netsim > 0) {
    for (int i = 0; i < f_.netsim; ++i) add(std::to_string(i));
  } else if (!f_.hosts.empty()) {
    std::stringstream ss(f_.hosts);
    for (std::string spec; std::getline(ss, spec, ',');) add(spec);
  } else {
    std::ifstream in(f_.hostfile);
    DTRAIN_CHECK_USAGE(in.good(), "launch: cannot read --hostfile ", f_.hostfile);
    // OpenMPI's format: "name [slots=N]" per line, # comments.
    for (std::string line; std::getline(in, line);) {
      line = line.substr(0, line.find('#'));
      std::stringstream ls(line);
      std::string name, slots;
      if (!(ls >> name)) continue;
      ls >> slots;
      add(slots.rfind("slots=", 0) == 0 ? name + ":" + slots.substr(6) : name);
    }
  }
  DTRAIN_CHECK_USAGE(!hosts.empty(), "launch: no hosts given");
  return hosts;
}

std::vector<std::string> Launcher::trainArgs(int64_t workers) const {
  std::vector<std::string> args = train_;
  for (const char* name : {"--workers", "--backend", "--resume", "--batch-size", "--accumulate"})
    args = launchDropFlag(args, name);
  const auto plan = planBatch(global_, workers, batch0_, acc0_);
  if (!plan)
    throw Error("launch: " + std::to_string(workers) + " workers cannot keep the global batch of " +
                std::to_string(global_) + " (neither --batch-size nor --accumulate divides it)");
  for (const std::string s : {"--backend", "mpi", "--resume", "auto"}) args.push_back(s);
  args.insert(args.end(), {"--workers", std::to_string(workers), "--batch-size", std::to_string(plan->batch)});
  if (plan->accumulate != 1 || launchFlagValue(train_, "--accumulate"))
    args.insert(args.end(), {"--accumulate", std::to_string(plan->accumulate)});
  return args;
}

void Launcher::log(nlohmann::json record) {
  record["time"] = wallNow();
  log_ << record.dump() << std::endl;
}

Launcher::Attempt Launcher::runAttempt(int attempt, int64_t resumeStep) {
  const fs::path adir = dir_ / "launch" / ("attempt-" + std::to_string(attempt));
  fs::remove_all(adir);
  fs::create_directories(adir);
  int64_t workers = 0;
  for (const auto& h : hosts_) workers += h.slots;
  // Each rank's exit code and time go to exit.<rank>: the first rank that ended
  // on its own with an error points at the host that was lost. Ranks that
  // mpirun killed afterwards are killed with their shell and write nothing.
  const std::string record =
      "d=\"$1\"; shift; \"$@\"; rc=$?; [ \"$rc\" -ne 0 ] && "
      "echo \"$rc $(date +%s.%N)\" > \"$d/exit.${OMPI_COMM_WORLD_RANK:-x}\"; exit $rc";
  std::vector<std::string> cmd;
  if (!netsim_.empty()) {
    std::string only;
    for (const auto& h : hosts_) only += (only.empty() ? "" : ",") + h.name;
    cmd = {"bash", netsim_, "mpirun", "-np", std::to_string(workers), "--ranks-per-host",
           std::to_string(f_.ranksPerHost), "--hosts", only, "--"};
  } else {
    std::string spec;
    for (const auto& h : hosts_) spec += (spec.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
    cmd = {"mpirun", "--allow-run-as-root", "-np", std::to_string(workers), "--host", spec,
           "--map-by", "slot", "--bind-to", "none"};
  }
  cmd.insert(cmd.end(), {"sh", "-c", record, "sh", adir.string(), "env",
                         "DTRAIN_LAUNCH_PROGRESS=" + (adir / "progress").string()});
  if (attempt == 0) {
    // The fault-injection hook fires in the first attempt only (a lost host stays lost).
    for (const char* v : {"DTRAIN_TEST_DIE_AT_STEP", "DTRAIN_TEST_DIE_RANK"})
      if (const char* s = std::getenv(v)) cmd.push_back(std::string(v) + "=" + s);
  } else {
    cmd.insert(cmd.end(), {"DTRAIN_TEST_DIE_AT_STEP=", "DTRAIN_TEST_DIE_RANK="});
  }
  cmd.push_back(launchSelfExe());
  cmd.push_back("train");
  const auto args = trainArgs(workers);
  cmd.insert(cmd.end(), args.begin(), args.end());

  int out[2];
  if (::pipe(out) != 0) throw Error("launch: pipe failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("launch: fork failed");
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    auto argv = launchArgv(cmd);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "dtrain: launch: cannot run %s\n", argv[0]);
    ::_exit(127);
  }
  ::close(out[1]);
  Attempt a;
  std::string pending;
  const fs::path progress = adir / "progress";
  bool forwarded = false;
  for (bool open = true; open;) {
    // Ctrl-C or SIGTERM to the launcher: the job is stopped (mpirun passes it on
    // to the ranks, which save a checkpoint), and nothing is restarted.
    if (stop::requested() && !forwarded) {
      ::kill(pid, SIGTERM);
      forwarded = true;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, 20);
    if (ready > 0) {
      char buf[4096];
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) {
        open = false;
      } else {
        pending.append(buf, static_cast<size_t>(n));
      }
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
        const std::string line = pending.substr(0, nl);
        if (!line.empty() && line[0] == '{') a.resultLine = line;
        else std::fprintf(stderr, "%s\n", line.c_str());
      }
    }
    // Failure -> training again: the first step the restarted job finishes.
    if (failedAt_ && readProgress(progress) > resumeStep) {
      secondsToRecover_ += launchSeconds(*failedAt_, Clock::now());
      failedAt_.reset();
    }
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  a.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  a.lastStep = readProgress(progress);
  return a;
}

// After a failure: a host that does not answer is lost; when all answer, the
// host of the rank that failed first (its exit record) is.
std::vector<size_t> Launcher::lostHosts(const fs::path& attemptDir, std::string& how) {
  std::vector<size_t> lost;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const int rc = !netsim_.empty()
                       ? runToStderr({"bash", netsim_, "exec", hosts_[i].name, "--", "true"}, true)
                       : runToStderr({"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                                      hosts_[i].name, "true"}, true);
    if (rc != 0) lost.push_back(i);
  }
  if (!lost.empty()) {
    how = "did not answer a probe";
    return lost;
  }
  double first = 0;
  int firstRank = -1, firstCode = 0;
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
    if (firstRank < 0 || at < first) first = at, firstRank = rank, firstCode = code;
  }
  if (firstRank < 0) return lost;
  // Ranks are placed host by host (--map-by slot), slots each.
  int r = firstRank;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (r < hosts_[i].slots) {
      lost.push_back(i);
      how = "its rank " + std::to_string(firstRank) + " failed first (exit code " + std::to_string(firstCode) + ")";
      break;
    }
    r -= hosts_[i].slots;
  }
  return lost;
}

void Launcher::run() {
  DTRAIN_CHECK_USAGE(!f_.train.empty() && f_.train[0] == "train",
                     "launch needs the train command after '--' (dtrain launch ... -- train ARGS...)");
  train_.assign(f_.train.begin() + 1, f_.train.end());
  DTRAIN_CHECK_USAGE(!launchFlagValue(train_, "--config"),
                     "launch reads the train flags only: give the options as flags, not --config");
  const auto dir = launchFlagValue(train_, "--checkpoint-dir");
  DTRAIN_CHECK_USAGE(dir && !dir->empty(), "launch needs --checkpoint-dir D in the train arguments (restarts resume from it)");
  DTRAIN_CHECK_USAGE(launchIntFlag(train_, "--checkpoint-every", 0) > 0,
                     "launch needs --checkpoint-every N (N > 0) in the train arguments");
  DTRAIN_CHECK_USAGE(f_.ranksPerHost >= 1, "launch: --ranks-per-host must be at least 1");
  DTRAIN_CHECK_USAGE(f_.maxRestarts >= 0, "launch: --max-restarts must be at least 0");
  hosts_ = parseHosts();
  DTRAIN_CHECK_USAGE(f_.minHosts >= 1 && f_.minHosts <= static_cast<int>(hosts_.size()), "launch: --min-hosts ",
                     f_.minHosts, " must be in 1..", hosts_.size(), " (the hosts given)");
  batch0_ = launchIntFlag(train_, "--batch-size", 64);
  acc0_ = launchIntFlag(train_, "--accumulate", 1);
  DTRAIN_CHECK_USAGE(batch0_ >= 1 && acc0_ >= 1, "launch: --batch-size and --accumulate must be at least 1");
  int64_t workers = 0;
  bool uniform = true;
  for (const auto& h : hosts_) workers += h.slots, uniform = uniform && h.slots == hosts_[0].slots;
  global_ = workers * batch0_ * acc0_;
  if (uniform) {
    for (int k = f_.minHosts; k < static_cast<int>(hosts_.size()); ++k)
      DTRAIN_CHECK_USAGE(planBatch(global_, k * hosts_[0].slots, batch0_, acc0_),
                         "launch: on ", k, " hosts (", k * hosts_[0].slots,
                         " workers) the global batch of ", global_,
                         " cannot be kept (neither --batch-size nor --accumulate divides it); "
                         "raise --min-hosts or pick a batch that divides");
  }
  dir_ = *dir;
  fs::create_directories(dir_);
  log_.open(dir_ / "launch.jsonl", std::ios::app);
  DTRAIN_CHECK_USAGE(log_.good(), "launch: cannot write ", (dir_ / "launch.jsonl").string());

  // --netsim N: this launch brings the emulated hosts up and takes them down.
  struct NetsimDown {
    std::string script;
    ~NetsimDown() {
      if (!script.empty()) runToStderr({"bash", script, "down"});
    }
  } down;
  if (f_.netsim > 0) {
    netsim_ = netsimScript();
    if (runToStderr({"bash", netsim_, "up", std::to_string(f_.netsim), "--rate", f_.rate}) != 0)
      throw Error("launch: netsim.sh up " + std::to_string(f_.netsim) + " failed (see above)");
    down.script = netsim_;
  }

  stop::SignalScope signals;  // a signal stops the launch instead of killing it mid-way
  int restarts = 0, hostsLost = 0;
  int64_t stepsRedone = 0, resumeStep = -1;
  for (int attempt = 0;; ++attempt) {
    int64_t w = 0;
    for (const auto& h : hosts_) w += h.slots;
    const auto plan = planBatch(global_, w, batch0_, acc0_);
    log({{"event", attempt == 0 ? "start" : "restart"}, {"attempt", attempt}, {"hosts", hostList(hosts_)},
         {"workers", w}, {"batch_size", plan ? plan->batch : 0}, {"accumulate", plan ? plan->accumulate : 0},
         {"global_batch", global_}, {"resume_step", std::max<int64_t>(resumeStep, 0)}});
    const Attempt a = runAttempt(attempt, resumeStep);
    if (a.exitCode == 0 && !a.resultLine.empty()) {
      nlohmann::json out = nlohmann::json::parse(a.resultLine, nullptr, false);
      if (out.is_discarded()) out = nlohmann::json::object();
      out["restarts"] = restarts;
      out["hosts_lost"] = hostsLost;
      out["steps_redone"] = stepsRedone;
      out["seconds_to_recover"] = std::round(secondsToRecover_ * 1000.0) / 1000.0;
      log({{"event", "done"}, {"hosts", hostList(hosts_)}, {"restarts", restarts}, {"hosts_lost", hostsLost},
           {"steps_redone", stepsRedone}, {"seconds_to_recover", out["seconds_to_recover"]}});
      std::cout << out.dump() << std::endl;
      return;
    }
    if (stop::requested()) {
      log({{"event", "stopped"}, {"signal", stop::signalName()}, {"last_step", a.lastStep}});
      throw stop::Interrupted("launch: stopped by " + std::string(stop::signalName()) +
                              "; the same command goes on from the newest checkpoint in " + dir_.string());
    }
    if (a.exitCode == 0 || a.exitCode == 2)
      throw Error(a.exitCode == 2 ? "launch: the train run refused its arguments (see above)"
                                  : "launch: the train run printed no result line");
    failedAt_ = Clock::now();
    std::string how = "no host found lost: restarting on the same hosts";
    const auto lost = lostHosts(dir_ / "launch" / ("attempt-" + std::to_string(attempt)), how);
    std::vector<LaunchHost> kept;
    std::string lostNames;
    for (size_t i = 0; i < hosts_.size(); ++i) {
      if (std::find(lost.begin(), lost.end(), i) != lost.end()) lostNames += (lostNames.empty() ? "" : ",") + hosts_[i].name;
      else kept.push_back(hosts_[i]);
    }
    resumeStep = newestCheckpointStep(dir_);
    if (a.lastStep >= 0) stepsRedone += a.lastStep - std::max<int64_t>(resumeStep, 0);
    log({{"event", "failure"}, {"attempt", attempt}, {"exit_code", a.exitCode}, {"last_step", a.lastStep},
         {"hosts_lost", lostNames}, {"why", how}, {"hosts", hostList(kept)}, {"resume_step", std::max<int64_t>(resumeStep, 0)}});
    hostsLost += static_cast<int>(lost.size());
    hosts_ = kept;
    std::fprintf(stderr, "dtrain: launch: job failed (mpirun exit %d) after step %lld; %s%s\n", a.exitCode,
                 static_cast<long long>(a.lastStep),
                 lostNames.empty() ? "" : ("host " + lostNames + " lost: " + how + "; ").c_str(),
                 lostNames.empty() ? how.c_str() : ("left: " + hostList(hosts_)).c_str());
    if (static_cast<int>(hosts_.size()) < f_.minHosts)
      throw Error("launch: " + std::to_string(hosts_.size()) + " hosts left, fewer than --min-hosts " +
                  std::to_string(f_.minHosts));
    if (restarts >= f_.maxRestarts)
      throw Error("launch: the job failed and its " + std::to_string(f_.maxRestarts) +
                  " restarts (--max-restarts) are used up");
    ++restarts;
    w = 0;
    for (const auto& h : hosts_) w += h.slots;
    const auto next = planBatch(global_, w, batch0_, acc0_);
    if (!next)
      throw Error("launch: " + std::to_string(w) + " workers cannot keep the global batch of " +
                  std::to_string(global_) + " (neither --batch-size nor --accumulate divides it)");
    std::fprintf(stderr, "dtrain: launch: restart %d on %zu hosts (%s): %lld workers x batch %lld x accumulate %lld, from step %lld\n",
                 restarts, hosts_.size(), hostList(hosts_).c_str(), static_cast<long long>(w),
                 static_cast<long long>(next->batch), static_cast<long long>(next->accumulate),
                 static_cast<long long>(std::max<int64_t>(resumeStep, 0)));
  }
}

}  // namespace

void addLaunchCommand(CLI::App& app) {
  auto f = std::make_shared<LaunchFlags>();
  CLI::App* sub = app.add_subcommand(
      "launch", "Elastic run across hosts: train under mpirun, restart without a lost host from the newest checkpoint");
  sub->add_option("--netsim", f->netsim, "N emulated hosts (scripts/netsim.sh; brought up and down by this run)")
      ->check(CLI::Range(1, 200));
  sub->add_option("--rate", f->rate, "With --netsim: link rate of each emulated host (e.g. 100mbit, 1gbit)");
  sub->add_option("--hosts", f->hosts, "Real hosts: H1[:RANKS],H2[:RANKS],... (mpirun --host)");
  sub->add_option("--hostfile", f->hostfile, "Real hosts: an OpenMPI hostfile (NAME [slots=N] per line)");
  sub->add_option("--min-hosts", f->minHosts, "Fewest hosts to go on with (else exit 1)");
  sub->add_option("--max-restarts", f->maxRestarts, "Restarts before giving up");
  sub->add_option("--ranks-per-host", f->ranksPerHost, "Ranks on each host (where a host names no count)");
  sub->add_option("train", f->train, "-- train ARGS...: the train run (needs --checkpoint-dir and --checkpoint-every)");
  sub->callback([f] { Launcher(*f).run(); });
}

}  // namespace dtrain::cli
