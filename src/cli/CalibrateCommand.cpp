#include "cli/CalibrateCommand.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/Calibrate.h"
#include "calibrate/CoreSharing.h"
#include "calibrate/MachineFile.h"
#include "calibrate/NetworkCoreCost.h"
#include "cli/launch/Hosts.h"
#include "core/Error.h"

namespace dtrain::cli {

namespace {

std::vector<std::string> calibrateList(const std::string& list, const char* flag) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    DTRAIN_CHECK_USAGE(!item.empty(), flag, ": empty entry in '", list, "'");
    out.push_back(item);
  }
  DTRAIN_CHECK_USAGE(!out.empty(), flag, " needs at least one entry");
  return out;
}

template <typename T>
std::vector<T> calibrateNumbers(const std::string& list, const char* flag) {
  std::vector<T> out;
  for (const auto& item : calibrateList(list, flag)) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    DTRAIN_CHECK_USAGE(used == item.size() && v >= 1, flag, ": '", item,
                       "' is not a positive whole number");
    out.push_back(static_cast<T>(v));
  }
  return out;
}

// scripts/netsim.sh, as `dtrain launch --netsim` finds it.
std::string calibrateNetsimScript() {
  if (const char* s = std::getenv("DTRAIN_NETSIM_SH"); s && *s) return s;
#ifdef DTRAIN_SOURCE_DIR
  if (std::filesystem::exists(DTRAIN_SOURCE_DIR "/scripts/netsim.sh"))
    return DTRAIN_SOURCE_DIR "/scripts/netsim.sh";
#endif
  throw UsageError("calibrate --netsim: scripts/netsim.sh not found; set DTRAIN_NETSIM_SH=PATH");
}

// --hosts: every host but the first (this machine) answers ssh before anything
// is measured; else mpirun fails only after the local measurements, with
// ORTE's "internal programming error".
void requireHostsAnswer(const std::vector<std::string>& hosts) {
  const launch::HostProbe probe("");
  for (size_t i = 1; i < hosts.size(); ++i) {
    const std::string name = hosts[i].substr(0, hosts[i].find(':'));
    DTRAIN_CHECK_USAGE(probe.answers({name}), "calibrate --hosts: host ", name,
                       " does not answer (ssh -o BatchMode=yes ", name,
                       " true failed: check its name, that it is up, and that ssh needs no password)");
  }
}

}  // namespace

void addCalibrateCommand(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "Measure this machine for dtrain simulate / plan: GEMM FLOP/s (fp32, bf16), memory "
      "bandwidth, the models' forward/backward/update times per layer and micro-batch, and "
      "alpha-beta fits of point-to-point and collectives for ranks as threads, as processes "
      "(mpirun) and across emulated (--netsim) or real (--hosts) hosts. Writes --out atomically.");
  struct Flags {
    calibrate::CalibrateConfig cfg;
    std::string models = "gpt-small,mlp", microBatches = "auto", hosts, out;
    bool noMpi = false;
    std::string internalOut, internalSizes, internalStream, internalShare, internalModel, internalWindow;
    std::string internalWaitShare;
    int internalRanksPerHost = 1, internalComputing = 1;
    double internalWindowS = 1;
    int64_t internalMicroBatch = 0;
  };
  auto f = std::make_shared<Flags>();
  sub->add_option("--out", f->out, "machine file to write (JSON)");
  sub->add_option("--models", f->models, "models to measure, comma-separated")->capture_default_str();
  sub->add_option("--micro-batches", f->microBatches, "micro-batch sizes, comma-separated; auto: 1, 2, 4, ... 256, up to "
                  "the first whose forward and backward take over 50 ms")
      ->capture_default_str();
  sub->add_option("--threads", f->cfg.threads, "kernel threads per rank (device)")->capture_default_str();
  sub->add_option("--precision", f->cfg.precision, "the models' precision: fp32 | bf16")
      ->capture_default_str();
  sub->add_option("--repeats", f->cfg.repeats, "timed steps per model and micro-batch (medians)")
      ->capture_default_str();
  sub->add_option("--max-bytes", f->cfg.maxBytes,
                  "largest message on this host (sizes 4 KiB, x4, ... up to it)")
      ->capture_default_str();
  sub->add_flag("--no-mpi", f->noMpi, "skip the processes-on-this-host (mpirun) measurements");
  sub->add_flag("--quick", f->cfg.small, "small GEMM and stream sizes (seconds less; for tests)");
  sub->add_option("--netsim", f->cfg.netsimHosts,
                  "emulated hosts (scripts/netsim.sh, as root; holds flock /tmp/netsim.lock)");
  sub->add_option("--rate", f->cfg.rate, "--netsim link rate, e.g. 100mbit, 1gbit");
  sub->add_option("--hosts", f->hosts, "real hosts H1,H2,... (mpirun --host; H1 = this machine, dtrain at the same path "
                  "on each), instead of --netsim");
  sub->add_option("--samples", f->cfg.samplesFile,
                  "also write the measured (bytes, seconds) points behind every fit (JSON)");
  auto* maxBytes = sub->get_option("--max-bytes");
  sub->add_option("--from", f->cfg.fromFile,
                  "an earlier machine file: keep its hosts, links and collectives, measure only compute and "
                  "--models (seconds; a model added, or a machine whose speed moved)");
  sub->add_option("--devices-per-host", f->cfg.devicesPerHost,
                  "devices (cores) per host in the file (default: this machine's cores; with --netsim "
                  "divided among the emulated hosts, at least 1)");
  // The ranks' side of the MPI measurements (mpirun starts this binary so).
  sub->add_option("--internal-comm", f->internalOut)->group("");
  sub->add_option("--internal-sizes", f->internalSizes)->group("");
  sub->add_option("--internal-ranks-per-host", f->internalRanksPerHost)->group("");
  sub->add_option("--internal-stream", f->internalStream)->group("");
  // One of the processes that time core sharing (calibrate/CoreSharing.h).
  sub->add_option("--internal-share", f->internalShare)->group("");
  sub->add_option("--internal-model", f->internalModel)->group("");
  sub->add_option("--internal-micro-batch", f->internalMicroBatch)->group("");
  sub->add_option("--internal-window", f->internalWindow)->group("");
  // One of the MPI ranks that time compute beside waiting ranks (CoreSharing.h).
  sub->add_option("--internal-wait-share", f->internalWaitShare)->group("");
  sub->add_option("--internal-computing", f->internalComputing)->group("");
  sub->add_option("--internal-window-s", f->internalWindowS)->group("");
  sub->callback([f, maxBytes] {
    if (!f->internalShare.empty()) {
      double start = 0, end = 0;
      DTRAIN_CHECK_USAGE(std::sscanf(f->internalWindow.c_str(), "%lf,%lf", &start, &end) == 2,
                         "--internal-window: expected START,END");
      calibrate::runShareRank(f->internalShare, f->internalModel, f->internalMicroBatch, f->cfg.threads,
                              f->cfg.precision, start, end);
      return;
    }
    if (!f->internalWaitShare.empty()) {
      calibrate::runWaitingShareRank(f->internalWaitShare, f->internalModel, f->internalMicroBatch, f->cfg.threads,
                                     f->cfg.precision, f->internalComputing, f->internalWindowS);
      return;
    }
    if (!f->internalStream.empty()) {
      // Streams until the parent's probe is done (a minute at most: a parent gone astray).
      calibrate::runStreamRank(f->internalStream, 60);
      return;
    }
    if (!f->internalOut.empty()) {
      calibrate::runCommRank(f->internalOut, calibrateNumbers<size_t>(f->internalSizes, "--internal-sizes"),
                             f->internalRanksPerHost);
      return;
    }
    DTRAIN_CHECK_USAGE(!f->out.empty(), "calibrate needs --out FILE (the machine file to write)");
    auto& c = f->cfg;
    c.models = calibrateList(f->models, "--models");
    if (f->microBatches != "auto") c.microBatches = calibrateNumbers<int64_t>(f->microBatches, "--micro-batches");
    if (!f->hosts.empty()) c.hosts = calibrateList(f->hosts, "--hosts");
    c.mpi = !f->noMpi;
    DTRAIN_CHECK_USAGE(c.fromFile.empty() || maxBytes->count() == 0, "--max-bytes: --from measures no links");
    std::error_code ec;
    c.self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (c.netsimHosts > 0) c.netsimScript = calibrateNetsimScript();
    calibrate::validate(c);
    if (c.fromFile.empty()) requireHostsAnswer(c.hosts);
    calibrate::writeMachineFile(calibrate::runCalibrate(c), f->out);
    std::fprintf(stderr, "calibrate: wrote %s\n", f->out.c_str());
  });
}

}  // namespace dtrain::cli
