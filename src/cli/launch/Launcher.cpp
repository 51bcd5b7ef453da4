#include "cli/launch/Launcher.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli/launch/Attempt.h"
#include "cli/launch/MembershipLog.h"
#include "cli/launch/Process.h"
#include "core/Error.h"
#include "core/StopSignal.h"

namespace dtrain::cli::launch {

namespace fs = std::filesystem;

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

namespace {

const char* const kNoAnswer = "did not answer a probe";

// After a failure: hosts that do not answer are lost; when all answer, the host
// of the rank that failed first (its exit record) is. `how` says which.
std::vector<size_t> findLostHosts(const std::vector<LaunchHost>& hosts, const HostProbe& probe,
                                  const fs::path& attemptDir, std::string& how) {
  std::vector<size_t> lost;
  for (size_t i = 0; i < hosts.size(); ++i)
    if (!probe.answers(hosts[i])) lost.push_back(i);
  if (!lost.empty()) {
    how = kNoAnswer;
    return lost;
  }
  const auto failed = firstFailedRank(attemptDir);
  if (!failed) return lost;
  const int h = hostOfRank(hosts, failed->rank);
  if (h >= 0) {
    lost.push_back(static_cast<size_t>(h));
    how = "its rank " + std::to_string(failed->rank) + " failed first (exit code " + std::to_string(failed->exitCode) + ")";
  }
  return lost;
}

// --netsim N: this launch brings the emulated hosts up and takes them down.
struct NetsimHosts {
  std::string script;
  ~NetsimHosts() {
    if (!script.empty()) runToStderr({"bash", script, "down"});
  }
};

// Hosts dropped earlier that --rejoin may take back, probed at most every
// --rejoin-probe seconds while a job runs (a probe forks; the watch polls every 20 ms).
class RejoinWatch {
 public:
  RejoinWatch(const LaunchFlags& f, const HostProbe& probe) : f_(f), probe_(probe) {}
  void drop(const LaunchHost& h) { dropped_.push_back(h); }
  // True when some dropped host answers now (checked at most every rejoinProbeS).
  bool dueAndAnswering() {
    if (!f_.rejoin || dropped_.empty()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return false;
    next_ = now + std::chrono::milliseconds(static_cast<int64_t>(f_.rejoinProbeS * 1000));
    for (const auto& h : dropped_)
      if (probe_.answers(h)) return true;
    return false;
  }
  // The dropped hosts that answer now, taken out of the dropped list.
  std::vector<LaunchHost> takeAnswering() {
    std::vector<LaunchHost> back, still;
    if (!f_.rejoin) return back;
    for (const auto& h : dropped_) (probe_.answers(h) ? back : still).push_back(h);
    dropped_ = still;
    return back;
  }

 private:
  const LaunchFlags& f_;
  const HostProbe& probe_;
  std::vector<LaunchHost> dropped_;
  std::chrono::steady_clock::time_point next_{};
};

// Hosts in the order they were given (rank 0 on the first of them).
std::vector<LaunchHost> inGivenOrder(const std::vector<LaunchHost>& given, const std::vector<LaunchHost>& some) {
  std::vector<LaunchHost> out;
  for (const auto& g : given)
    for (const auto& h : some)
      if (h.name == g.name) out.push_back(h);
  return out;
}

}  // namespace

void runLaunch(const LaunchFlags& f) {
  TrainArgs train(f.train);
  DTRAIN_CHECK_USAGE(f.ranksPerHost >= 1, "launch: --ranks-per-host must be at least 1");
  DTRAIN_CHECK_USAGE(f.maxRestarts >= 0, "launch: --max-restarts must be at least 0");
  DTRAIN_CHECK_USAGE(f.rejoinProbeS > 0, "launch: --rejoin-probe must be more than 0 seconds");
  const std::vector<LaunchHost> given = parseHosts(f);
  std::vector<LaunchHost> hosts = given;
  DTRAIN_CHECK_USAGE(f.minHosts >= 1 && f.minHosts <= static_cast<int>(hosts.size()), "launch: --min-hosts ",
                     f.minHosts, " must be in 1..", hosts.size(), " (the hosts given)");
  DTRAIN_CHECK_USAGE(train.batchSize() >= 1 && train.accumulate() >= 1,
                     "launch: --batch-size and --accumulate must be at least 1");
  bool uniform = true;
  for (const auto& h : hosts) uniform = uniform && h.slots == hosts[0].slots;
  train.fixGlobalBatch(workersOf(hosts));
  if (uniform) {
    for (int k = f.minHosts; k < static_cast<int>(hosts.size()); ++k)
      DTRAIN_CHECK_USAGE(train.plan(k * hosts[0].slots), "launch: on ", k, " hosts (", k * hosts[0].slots,
                         " workers) the global batch of ", train.globalBatch(),
                         " cannot be kept (neither --batch-size nor --accumulate divides it); "
                         "raise --min-hosts or pick a batch that divides");
  }
  const fs::path dir = train.checkpointDir();
  fs::create_directories(dir);
  MembershipLog log(dir);

  NetsimHosts netsimHosts;
  std::string netsim;
  if (f.netsim > 0) {
    netsim = netsimScript();
    if (runToStderr({"bash", netsim, "up", std::to_string(f.netsim), "--rate", f.rate}) != 0)
      throw Error("launch: netsim.sh up " + std::to_string(f.netsim) + " failed (see above)");
    netsimHosts.script = netsim;
  }
  const HostProbe probe(netsim);
  RejoinWatch rejoin(f, probe);

  stop::SignalScope signals;  // a signal stops the launch instead of killing it mid-way
  LaunchTally& tally = log.tally();
  int64_t resumeStep = -1;
  // Hosts that answered again: they join at the restart that follows.
  auto takeBack = [&](const char* when) {
    const auto back = rejoin.takeAnswering();
    if (back.empty()) return;
    hosts = inGivenOrder(given, [&] {
      auto all = hosts;
      all.insert(all.end(), back.begin(), back.end());
      return all;
    }());
    tally.hostsRejoined += static_cast<int>(back.size());
    log.record({{"event", "rejoin"}, {"hosts_rejoined", hostList(back)}, {"hosts", hostList(hosts)}, {"when", when},
                {"resume_step", std::max<int64_t>(resumeStep, 0)}});
    std::fprintf(stderr, "dtrain: launch: host %s answers again (--rejoin): taken back %s; hosts: %s\n",
                 hostList(back).c_str(), when, hostList(hosts).c_str());
  };
  for (int attempt = 0;; ++attempt) {
    const int64_t w = workersOf(hosts);
    const auto plan = train.plan(w);
    log.record({{"event", attempt == 0 ? "start" : "restart"}, {"attempt", attempt}, {"hosts", hostList(hosts)},
                {"workers", w}, {"batch_size", plan ? plan->batch : 0}, {"accumulate", plan ? plan->accumulate : 0},
                {"global_batch", train.globalBatch()}, {"resume_step", std::max<int64_t>(resumeStep, 0)}});
    AttemptSpec spec{attempt, dir / "launch" / ("attempt-" + std::to_string(attempt)), hosts, f.ranksPerHost,
                     netsim, train.forWorkers(w)};
    AttemptWatch watch;
    bool rejoinStop = false, trainingRecorded = false;
    watch.progressed = [&](int64_t step) {
      // Failure or rejoin -> training again: the first step a restarted job finishes.
      if (attempt > 0 && step > resumeStep && !trainingRecorded) {
        log.record({{"event", "training"}, {"attempt", attempt}, {"step", step}, {"hosts", hostList(hosts)}});
        trainingRecorded = true;
      }
      log.progressed(step, resumeStep);
    };
    watch.shouldStop = [&] {
      // Ctrl-C or SIGTERM to the launcher: the job is stopped (the ranks save a
      // checkpoint), and nothing is restarted.
      if (stop::requested()) return true;
      // --rejoin: a dropped host answers again: the job stops the same way and
      // starts again with it, from the checkpoint the stop wrote.
      if (!rejoinStop && rejoin.dueAndAnswering()) {
        std::fprintf(stderr, "dtrain: launch: a dropped host answers again (--rejoin): stopping the job to take it back\n");
        rejoinStop = true;
      }
      return rejoinStop;
    };
    const AttemptResult a = runAttempt(spec, watch);
    if (a.exitCode == 0 && !a.resultLine.empty()) {
      const nlohmann::json out = log.finalResult(a.resultLine);
      log.record({{"event", "done"}, {"hosts", hostList(hosts)}, {"restarts", tally.restarts},
                  {"hosts_lost", tally.hostsLost}, {"hosts_rejoined", tally.hostsRejoined},
                  {"steps_redone", tally.stepsRedone}, {"seconds_to_recover", out["seconds_to_recover"]}});
      std::cout << out.dump() << std::endl;
      return;
    }
    if (stop::requested()) {
      log.record({{"event", "stopped"}, {"signal", stop::signalName()}, {"last_step", a.lastStep}});
      throw stop::Interrupted("launch: stopped by " + std::string(stop::signalName()) +
                              "; the same command goes on from the newest checkpoint in " + dir.string());
    }
    if (a.exitCode == 0 || a.exitCode == 2)
      throw Error(a.exitCode == 2 ? "launch: the train run refused its arguments (see above)"
                                  : "launch: the train run printed no result line");
    // Whatever the attempt left (a daemon and ranks behind a dead link) goes.
    for (const auto& h : hosts) probe.endLeftovers(h);
    resumeStep = newestCheckpointStep(dir);
    if (a.stopAsked && newestCheckpointStep(dir) >= std::max<int64_t>(a.lastStep, 0)) {
      // Stopped to take a host back, with a checkpoint at its last step: not a failure.
      ++tally.restarts;
      takeBack("at this restart");
      std::fprintf(stderr, "dtrain: launch: restart %d on %zu hosts (%s) from step %lld\n", tally.restarts,
                   hosts.size(), hostList(hosts).c_str(), static_cast<long long>(std::max<int64_t>(resumeStep, 0)));
      continue;
    }
    log.failed();
    std::string how = "no host found lost: restarting on the same hosts";
    const auto lost = findLostHosts(hosts, probe, spec.dir, how);
    std::vector<LaunchHost> kept, lostHosts;
    for (size_t i = 0; i < hosts.size(); ++i)
      (std::find(lost.begin(), lost.end(), i) != lost.end() ? lostHosts : kept).push_back(hosts[i]);
    const std::string lostNames = hostList(lostHosts);
    if (a.lastStep >= 0) tally.stepsRedone += a.lastStep - std::max<int64_t>(resumeStep, 0);
    log.record({{"event", "failure"}, {"attempt", attempt}, {"exit_code", a.exitCode}, {"last_step", a.lastStep},
                {"hosts_lost", lostNames}, {"why", how}, {"hosts", hostList(kept)},
                {"resume_step", std::max<int64_t>(resumeStep, 0)}});
    tally.hostsLost += static_cast<int>(lost.size());
    hosts = kept;
    std::fprintf(stderr, "dtrain: launch: job failed (mpirun exit %d) after step %lld; %s%s\n", a.exitCode,
                 static_cast<long long>(a.lastStep),
                 lostNames.empty() ? "" : ("host " + lostNames + " lost: " + how + "; ").c_str(),
                 lostNames.empty() ? how.c_str() : ("left: " + hostList(hosts)).c_str());
    // Hosts dropped at an earlier failure that answer again join now; the ones
    // just lost become candidates when they did not answer (a host whose ranks
    // failed while it answered has nothing to come back from: it stays out).
    takeBack("at this restart");
    if (how == kNoAnswer)
      for (const auto& h : lostHosts) rejoin.drop(h);
    if (static_cast<int>(hosts.size()) < f.minHosts)
      throw Error("launch: " + std::to_string(hosts.size()) + " hosts left, fewer than --min-hosts " +
                  std::to_string(f.minHosts));
    if (tally.failures >= f.maxRestarts)
      throw Error("launch: the job failed and its " + std::to_string(f.maxRestarts) +
                  " restarts (--max-restarts) are used up");
    ++tally.failures;
    ++tally.restarts;
    const int64_t next = workersOf(hosts);
    const BatchPlan p = train.planOrThrow(next);
    std::fprintf(stderr, "dtrain: launch: restart %d on %zu hosts (%s): %lld workers x batch %lld x accumulate %lld, from step %lld\n",
                 tally.restarts, hosts.size(), hostList(hosts).c_str(), static_cast<long long>(next),
                 static_cast<long long>(p.batch), static_cast<long long>(p.accumulate),
                 static_cast<long long>(std::max<int64_t>(resumeStep, 0)));
  }
}

}  // namespace dtrain::cli::launch
