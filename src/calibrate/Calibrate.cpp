#include "calibrate/Calibrate.h"

#include <atomic>
#include <cmath>
#include <exception>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "autograd/Precision.h"
#include "calibrate/CommProbe.h"
#include "calibrate/CoreSharing.h"
#include "calibrate/Fit.h"
#include "calibrate/MachineFile.h"
#include "calibrate/NetworkCoreCost.h"
#include "calibrate/Shell.h"
#include "comm/BackendRegistry.h"
#include "comm/local/Local.h"
#include "core/Error.h"
#include "core/Timer.h"
#include "nn/ModelRegistry.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::calibrate {

using nlohmann::json;

namespace {

// Passes over a model's micro-batch sizes (AnalyticModel.h: medianOfPasses),
// this many before the links' probes and as many after them: on a VM whose
// speed moves within minutes the medians then span the whole calibration,
// rather than one fast or slow minute that the runs after it would not see.
constexpr int kModelPassesEach = 2;
// The longest forward + backward at which core sharing is timed (CoreSharing.h):
// a step of the size a run would use, and runs of a second hold ~10 of them.
constexpr double kSharingStepS = 0.03;

void progress(const char* fmt, auto... args) {
  std::fprintf(stderr, "calibrate: ");
  std::fprintf(stderr, fmt, args...);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

std::string procField(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "";
}

std::string joinSizes(const std::vector<size_t>& sizes) {
  std::string s;
  for (size_t b : sizes) {
    if (!s.empty()) s += ',';
    s += std::to_string(b);
  }
  return s;
}

ProbeResult probeLocal(int ranks, const ProbeConfig& cfg) {
  ProbeResult result;
  std::mutex m;
  comm::local::runLocal(ranks, [&](comm::Communicator& c) {
    ProbeResult r = probeComm(c, cfg);
    if (c.rank() == 0) {
      std::lock_guard<std::mutex> lock(m);
      result = std::move(r);
    }
  });
  return result;
}

// The rank command mpirun starts: this binary in its internal mode.
std::string rankCommand(const CalibrateConfig& c, const std::string& out,
                        const std::vector<size_t>& sizes, int ranksPerHost) {
  return shellQuote(c.self) + " calibrate --internal-comm " + shellQuote(out) + " --internal-sizes " +
         joinSizes(sizes) + " --internal-ranks-per-host " + std::to_string(ranksPerHost);
}

ProbeResult readProbe(const std::string& file) {
  std::ifstream in(file);
  DTRAIN_CHECK(in, "calibrate: the MPI ranks left no results in ", file);
  json j = json::parse(in, nullptr, false);
  DTRAIN_CHECK(!j.is_discarded(), "calibrate: unreadable MPI results in ", file);
  std::remove(file.c_str());
  return probeFromJson(j);
}

// The largest relative distance of a sample from its fit: how well the
// alpha-beta line describes the measurements.
double worstResidual(const AlphaBeta& fit, const std::vector<Sample>& samples) {
  double worst = 0;
  for (const Sample& s : samples) worst = std::max(worst, std::abs(fit.seconds(s.bytes) / s.seconds - 1));
  return worst;
}

void describeProbe(const char* kind, const ProbeResult& r, json* samples) {
  if (r.pointToPoint.bytesPerS > 0)
    progress("%s point-to-point: alpha %.1f us, %.3g B/s (fit within %.0f%%)", kind,
             r.pointToPoint.alphaS * 1e6, r.pointToPoint.bytesPerS,
             100 * worstResidual(r.pointToPoint, r.pointToPointSamples));
  for (const auto& c : r.collectives)
    progress("%s %s (%d ranks, %d per host): alpha %.1f us, %.3g B/s (fit within %.0f%%)", kind,
             c.name.c_str(), c.ranks, c.ranksPerHost, c.fit.alphaS * 1e6, c.fit.bytesPerS,
             100 * worstResidual(c.fit, c.samples));
  if (!samples) return;
  json j = toJson(r);
  if (r.pointToPoint.bytesPerS == 0) j.erase("point_to_point");
  if (samples->contains(kind)) {
    (*samples)[kind]["collectives"].update(j["collectives"]);
  } else {
    (*samples)[kind] = j;
  }
}

// Runs the emulated hosts' measurement script, whose last mpirun streams
// between the hosts (`calibrate --internal-stream`), and meanwhile probes this
// machine's cores with the streams paused and beside them, 3 times: the
// median core seconds the network took a byte (NetworkCoreCost.h).
double coreTimeBesideStreams(const CalibrateConfig& c, const std::string& script, const std::string& stream,
                             int hosts) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<bool> done{false};
  std::exception_ptr failure;
  std::thread shell([&] {
    try {
      runShell(script, "the measurement across hosts");
    } catch (...) {
      failure = std::current_exception();
    }
    done = true;
  });
  const auto pairs = probeBesideStreams(stream, cores, c.small ? 0.4 : 1.0, 3, 900, [&] { return done.load(); });
  shell.join();
  if (failure) std::rethrow_exception(failure);
  DTRAIN_CHECK(!pairs.empty(), "calibrate: the streaming ranks never started (no ", stream, ".started)");
  const auto logs = readStreamLogs(stream, hosts);
  std::vector<double> perByte, lost, rate;
  for (const ProbePair& p : pairs) {
    const double bytes = bytesBetween(logs, p.t0, p.t1), s = p.t1 - p.t0;
    perByte.push_back(coreSecondsPerByte(p, cores, bytes));
    lost.push_back(lostCoreSeconds(p, cores) / (cores * s));
    rate.push_back(bytes / s);
  }
  progress("the network's core time: %.2f ns a byte (median of %zu: %d probe threads lost %.0f%% of their "
           "work while the hosts sent %.0f MB/s)",
           median(perByte) * 1e9, pairs.size(), cores, 100 * median(lost), median(rate) / 1e6);
  return median(perByte);
}

// Across hosts: 1 rank per host, then 2 (sharing each host's link and cores);
// emulated hosts also 2 ranks on one host (their intra_host) and the
// network's core time. Rank 0 writes the fits to this machine's /tmp: with --hosts, the first host
// must be this one (and the binary at the same path on every host).
void probeAcrossHosts(const CalibrateConfig& c, int hosts, const std::vector<size_t>& sizes,
                      json& links, json& collectives, json* samples) {
  const std::string one = tempFile("inter1"), two = tempFile("inter2"), bucket = tempFile("burst");
  const std::string stream = tempFile("stream"), intra = tempFile("intra");
  std::string script;
  if (c.netsimHosts > 0) {
    const std::string ns = "bash " + shellQuote(c.netsimScript);
    script = "set -e; trap " + shellQuote(ns + " down >/dev/null 2>&1") + " EXIT; " + ns + " burst " +
             shellQuote(c.rate) + " > " + shellQuote(bucket) + "; " + ns + " up " +
             std::to_string(hosts) + " --rate " + shellQuote(c.rate) + " >&2; " + ns +
             " mpirun -np " + std::to_string(hosts) + " --ranks-per-host 1 -- " +
             rankCommand(c, one, sizes, 1) + "; " + ns + " mpirun -np " +
             std::to_string(2 * hosts) + " --ranks-per-host 2 -- " + rankCommand(c, two, sizes, 2) + "; " + ns +
             " mpirun -np 2 --ranks-per-host 2 -- " + rankCommand(c, intra, sizes, 2) + "; " +
             ns + " mpirun -np " + std::to_string(hosts) + " --ranks-per-host 1 -- " + shellQuote(c.self) +
             " calibrate --internal-stream " + shellQuote(stream);
    // Another user's emulated network would be torn down by ours: wait for its lock.
    const std::string lock = shellQuote(c.lockFile);
    script = "flock -n " + lock + " true || echo 'calibrate: waiting for " + c.lockFile +
             " (another user holds the emulated network)' >&2; flock " + lock + " bash -c " +
             shellQuote(script);
  } else {
    auto hostList = [&](int slots) {
      std::string s;
      for (const auto& h : c.hosts) s += (s.empty() ? "" : ",") + h + ":" + std::to_string(slots);
      return s;
    };
    const std::string mpirun = "mpirun --allow-run-as-root --map-by slot --bind-to none";
    script = mpirun + " -np " + std::to_string(hosts) + " --host " + hostList(1) + " " +
             rankCommand(c, one, sizes, 1) + " && " + mpirun + " -np " + std::to_string(2 * hosts) +
             " --host " + hostList(2) + " " + rankCommand(c, two, sizes, 2);
  }
  progress("across %d hosts: %zu sizes up to %zu bytes, 1 then 2 ranks per host%s", hosts, sizes.size(),
           sizes.back(), c.netsimHosts > 0 ? "; 2 ranks on one host; the network's core time" : "");
  if (c.netsimHosts == 0) {
    runShell(script, "the measurement across hosts");
  } else {
    // The script's last mpirun streams while this process probes its cores.
    links["inter_host"]["core_s_per_byte"] = coreTimeBesideStreams(c, script, stream, hosts);
  }
  const ProbeResult r1 = readProbe(one), r2 = readProbe(two);
  describeProbe("inter_host", r1, samples);
  describeProbe("inter_host_shared", r2, samples);
  if (c.netsimHosts > 0) {
    // 2 ranks on one emulated host: TCP over its loopback, several times
    // slower than this machine's shared memory, which it must not stand for.
    const ProbeResult r = readProbe(intra);
    describeProbe("intra_host", r, samples);
    links["intra_host"] = linkJson(r.pointToPoint);
    collectives["intra_host"] = collectivesJson(r);
  }
  links["inter_host"].update(linkJson(r1.pointToPoint));
  if (c.netsimHosts > 0) {
    // The emulated links' token bucket, for the simulator's messages after an idle moment.
    std::ifstream in(bucket);
    double bytes = 0;
    DTRAIN_CHECK(in >> bytes && bytes > 0, "calibrate: netsim.sh burst gave no bucket size in ", bucket);
    std::remove(bucket.c_str());
    links["inter_host"]["burst_bytes"] = static_cast<int64_t>(bytes);
  }
  collectives["inter_host"] = collectivesJson(r1);
  // 2 ranks per host sharing its link and cores: the simulator's fits for groups
  // of that shape (8 ranks packed 2 a host); the hierarchical allreduce, which
  // needs several a host, also stands for every shape across hosts.
  json shared = collectivesJson(r2);
  collectives["inter_host_shared"] = shared;
  if (shared.contains("allreduce_hier")) collectives["inter_host"]["allreduce_hier"] = shared["allreduce_hier"];
}

}  // namespace

double rateBytesPerS(const std::string& rate) {
  static const std::regex re(R"(^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$)");
  std::smatch m;
  if (!std::regex_match(rate, m, re)) return 0;
  const double n = std::stod(m[1].str());
  const std::string u = m[3].str();
  const double mult = u == "bit" ? 1 / 8.0 : u == "kbit" ? 1e3 / 8 : u == "mbit" ? 1e6 / 8
                    : u == "gbit" ? 1e9 / 8 : u == "bps" ? 1 : u == "kbps" ? 1e3
                    : u == "mbps" ? 1e6 : 1e9;
  return n * mult;
}

void validate(const CalibrateConfig& c) {
  DTRAIN_CHECK_USAGE(!c.models.empty(), "--models needs at least one model");
  for (const auto& m : c.models) nn::modelInfo(m);  // UsageError naming the known models
  for (int64_t b : c.microBatches)
    DTRAIN_CHECK_USAGE(b >= 1, "--micro-batches: sizes must be >= 1 (got ", b, ")");
  autograd::parsePrecision(c.precision);
  DTRAIN_CHECK_USAGE(c.threads >= 1, "--threads must be >= 1 (got ", c.threads, ")");
  DTRAIN_CHECK_USAGE(c.repeats >= 1, "--repeats must be >= 1 (got ", c.repeats, ")");
  DTRAIN_CHECK_USAGE(c.maxBytes >= 16384 && c.maxBytes % 4 == 0,
                     "--max-bytes must be a multiple of 4 and at least 16384 (got ", c.maxBytes, ")");
  DTRAIN_CHECK_USAGE(c.netsimHosts >= 0, "--netsim must be >= 0 hosts");
  DTRAIN_CHECK_USAGE(c.netsimHosts == 0 || c.hosts.empty(), "--netsim and --hosts exclude each other");
  DTRAIN_CHECK_USAGE(c.netsimHosts != 1, "--netsim needs at least 2 hosts");
  DTRAIN_CHECK_USAGE(c.netsimHosts == 0 || rateBytesPerS(c.rate) > 0,
                     "--netsim needs --rate (e.g. 100mbit, 1gbit), got '", c.rate, "'");
  DTRAIN_CHECK_USAGE(c.netsimHosts > 0 || c.rate.empty(), "--rate applies to --netsim");
  DTRAIN_CHECK_USAGE(c.hosts.empty() || c.hosts.size() >= 2, "--hosts needs at least 2 hosts");
  DTRAIN_CHECK_USAGE(c.devicesPerHost >= 0, "--devices-per-host must be >= 0");
  if (!c.fromFile.empty()) {
    DTRAIN_CHECK_USAGE(c.netsimHosts == 0 && c.hosts.empty(),
                       "--from keeps FILE's hosts and links: --netsim and --hosts measure new ones");
    DTRAIN_CHECK_USAGE(c.samplesFile.empty(), "--samples: --from measures no links");
    DTRAIN_CHECK_USAGE(c.devicesPerHost == 0, "--devices-per-host: --from keeps FILE's hosts");
  }
}

namespace {

// The machine file's description of the hosts (a new calibration's).
json describeMachine(const CalibrateConfig& c, int hosts, int cores) {
  json m;
  // Emulated hosts all live in this machine: they share its cores and memory.
  const int hostsHere = c.netsimHosts > 0 ? c.netsimHosts : 1;
  const int devices = c.devicesPerHost > 0 ? c.devicesPerHost : std::max(1, cores / hostsHere);
  std::string name = procField("/proc/cpuinfo", "model name") + ", " + std::to_string(cores) + " vCPUs";
  if (c.netsimHosts > 0) name += "; " + std::to_string(hosts) + " emulated hosts at " + c.rate;
  if (!c.hosts.empty()) name += "; " + std::to_string(hosts) + " hosts";
  m["format"] = kMachineFormat;
  m["name"] = name;
  m["hosts"] = hosts;
  m["devices_per_host"] = devices;
  // The emulated hosts' ranks all run on this machine's cores (the simulator
  // slows every rank once the run's ranks outnumber them).
  if (c.netsimHosts > 0) m["shared_cores"] = cores;
  // dtrain's transport (MPI over TCP) sends only inside MPI calls: a pipeline
  // stage does not compute while its message goes out.
  m["async_sends"] = false;
  const double memKiB = std::atof(procField("/proc/meminfo", "MemTotal").c_str());
  m["memory_per_device_bytes"] = static_cast<int64_t>(memKiB * 1024 / (devices * hostsHere));
  return m;
}

// --from FILE: an earlier calibration whose hosts, links and collectives this
// one keeps (its compute and the models measured are replaced).
json readBaseMachine(const std::string& path) {
  std::ifstream in(path);
  DTRAIN_CHECK_USAGE(in, "calibrate --from: cannot read ", path);
  json m = json::parse(in, nullptr, false);
  DTRAIN_CHECK_USAGE(!m.is_discarded() && m.is_object(), "calibrate --from: ", path, " is not a JSON object");
  // A hand-written cluster file (machine-files.md) fails here too: it has no links.
  try {
    checkMachineJson(m);
  } catch (const Error& e) {
    throw UsageError("calibrate --from " + path + ": " + e.what());
  }
  return m;
}

// What ranks pay to talk: pairs summing on shared cores, threads of one
// process, processes of this host and (several hosts) across them.
void measureLinks(const CalibrateConfig& c, int hosts, int cores, json& m, json* samples) {
  // Pairs of processes on this host's cores (mpirun): the tensor-parallel sums
  // of packed ranks wait for their partner's core.
  if (c.mpi) {
    const auto waits = measurePairedSumWaits(
        {.self = c.self, .computeMs = 1, .iters = c.small ? 10 : 200, .runs = c.small ? 1 : 3}, cores);
    for (const PairedSumWait& w : waits) {
      m["paired_sum_waits"].push_back({{"ranks_per_core", w.ranksPerCore}, {"seconds", w.seconds}});
      progress("a 2-rank sum after 1 ms of compute, %g ranks a core: %.2f ms more than alone", w.ranksPerCore,
               w.seconds * 1e3);
    }
  }

  json links, collectives;
  const std::vector<size_t> sizes = messageSizes(4096, c.maxBytes);
  ProbeConfig local{.sizes = sizes, .ranksPerHost = 2, .secondsPerRun = 0.03, .runs = 5};
  const ProbeResult threads2 = probeLocal(2, local);
  describeProbe("same_process", threads2, samples);
  links["same_process"] = linkJson(threads2.pointToPoint);
  collectives["same_process"] = collectivesJson(threads2);
  // The hierarchical allreduce: 4 threads in groups of 2.
  ProbeConfig hier = local;
  hier.pointToPoint = false;
  hier.hierOnly = true;
  const ProbeResult threads4 = probeLocal(4, hier);
  describeProbe("same_process", threads4, samples);
  json hierFit = collectivesJson(threads4);
  for (auto& [name, fit] : hierFit.items()) fit["ranks_per_host"] = 4;  // all on this host
  collectives["same_process"].update(hierFit);

  // Emulated hosts' ranks of one host talk over that host's loopback (netsim.sh
  // runs Open MPI's TCP transport only): measured there, with the hosts.
  if (c.mpi && c.netsimHosts == 0) {
    const std::string out = tempFile("intra");
    progress("processes on this host: mpirun -np 2, %zu sizes up to %zu bytes", sizes.size(), sizes.back());
    runShell("mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 " +
                 rankCommand(c, out, sizes, 2),
             "mpirun on this host");
    const ProbeResult intra = readProbe(out);
    describeProbe("intra_host", intra, samples);
    links["intra_host"] = linkJson(intra.pointToPoint);
    collectives["intra_host"] = collectivesJson(intra);
  }

  if (hosts > 1) {
    // Messages that take at most ~0.15 s each at the link rate (real hosts: 16 MiB).
    const double rate = c.netsimHosts > 0 ? rateBytesPerS(c.rate) : 0;
    size_t maxBytes = c.maxBytes;
    if (rate > 0)
      while (maxBytes > 262144 && static_cast<double>(maxBytes) > 0.15 * rate) maxBytes /= 4;
    // From 1 KiB: compressed buckets (PowerSGD's factors) are a few KiB, and a fit
    // from 4 KiB up extrapolates badly below its smallest size.
    probeAcrossHosts(c, hosts, messageSizes(1024, maxBytes), links, collectives, samples);
  }
  m["links"] = links;
  m["collectives"] = collectives;
}

}  // namespace

nlohmann::json runCalibrate(const CalibrateConfig& c) {
  validate(c);
  Timer total;
  kernels::configureKernels(c.threads, kernels::GemmBackend::Auto);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int hosts = c.netsimHosts > 0 ? c.netsimHosts : std::max<int>(1, static_cast<int>(c.hosts.size()));
  json m = c.fromFile.empty() ? describeMachine(c, hosts, cores) : readBaseMachine(c.fromFile);
  if (!c.fromFile.empty()) progress("keeping the hosts, links and collectives of %s", c.fromFile.c_str());

  const ComputeRates rates = measureCompute(c.small);
  progress("GEMM fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s, stream %.1f GB/s (%d thread%s)",
           rates.fp32FlopsPerS / 1e9, rates.bf16FlopsPerS / 1e9, rates.memoryBytesPerS / 1e9,
           c.threads, c.threads == 1 ? "" : "s");
  m["compute"] = computeJson(rates);

  // Each model's sizes and its passes at each (the first pass finds where the
  // automatic sizes stop).
  struct Passes {
    std::vector<int64_t> sizes;
    std::map<int64_t, std::vector<ModelTimes>> times;
  };
  std::map<std::string, Passes> profiles;
  const bool autoSizes = c.microBatches.empty();
  for (const auto& model : c.models)
    profiles[model].sizes = autoSizes ? std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256} : c.microBatches;
  auto profilePasses = [&] {
    autograd::PrecisionScope precision(autograd::parsePrecision(c.precision));
    for (const auto& model : c.models) {
      Passes& p = profiles[model];
      for (int pass = 0; pass < kModelPassesEach; ++pass) {
        const bool first = p.times.empty();
        for (size_t k = 0; k < p.sizes.size(); ++k) {
          const int64_t mb = p.sizes[k];
          p.times[mb].push_back(profileModel({.model = model, .microBatch = mb, .repeats = c.repeats,
                                              .minSeconds = c.small ? 0 : 0.5 / kModelPassesEach}));
          const ModelTimes& t = p.times[mb].back();
          if (first && autoSizes && t.forwardS + t.backwardS > c.autoStopSeconds) {
            p.sizes.resize(k + 1);
            break;
          }
        }
      }
    }
  };
  profilePasses();
  json samples;
  if (c.fromFile.empty()) measureLinks(c, hosts, cores, m, &samples);
  profilePasses();
  // Core sharing runs its own processes, each in c.precision.
  for (const auto& model : c.models) {
    const Passes& p = profiles.at(model);
    json entry = {{"precision", c.precision}, {"threads", c.threads}};
    // Core sharing at the largest size whose step is short (gpt-small: 4).
    int64_t sharingSize = p.sizes.front();
    double sharingStepS = 0;
    for (int64_t mb : p.sizes) {
      const ModelTimes t = medianOfPasses(p.times.at(mb));
      entry["micro_batches"][std::to_string(mb)] = modelTimesJson(t);
      progress("%s micro-batch %lld: forward %.2f ms, backward %.2f ms, %s update %.2f ms (median of %zu passes%s)",
               model.c_str(), static_cast<long long>(mb), t.forwardS * 1e3, t.backwardS * 1e3,
               t.optimizer.c_str(), t.updateS * 1e3, p.times.at(mb).size(),
               c.fromFile.empty() ? ", half at the calibration's start, half at its end" : "");
      if (mb == sharingSize || t.forwardS + t.backwardS <= kSharingStepS) {
        sharingSize = mb;
        sharingStepS = t.forwardS + t.backwardS + t.updateS;
      }
    }
    const CoreSharingConfig sharingConfig{.self = c.self, .model = model, .microBatch = sharingSize,
                                          .threads = c.threads, .precision = c.precision,
                                          .aloneStepS = sharingStepS, .windowS = c.small ? 0.1 : 1.0,
                                          .rounds = c.small ? 1 : 3};
    const CoreSharing sharing = measureCoreSharing(sharingConfig, cores);
    entry["shared_slowdown"] = sharing.slowdown;
    progress("%s micro-batch %lld, %d processes on %d cores: %.2f ms a step each, the profile's %.2f: %.3fx slower "
             "than a %.3g share",
             model.c_str(), static_cast<long long>(sharingSize), sharing.processes, cores, sharing.sharedS * 1e3,
             sharingStepS * 1e3, sharing.slowdown, sharing.share);
    if (c.mpi) {
      const WaitingSharing waiting = measureWaitingSharing(sharingConfig, cores);
      entry["waiting_slowdown"] = waiting.slowdown;
      progress("%s micro-batch %lld, %d MPI processes on %d cores, %d waiting: %.2f ms a step each, the profile's "
               "%.2f: %.3fx slower",
               model.c_str(), static_cast<long long>(sharingSize), waiting.processes, cores,
               waiting.processes - waiting.computing, waiting.sharedS * 1e3, sharingStepS * 1e3, waiting.slowdown);
    }
    m["models"][model] = entry;
  }
  checkMachineJson(m);
  if (!c.samplesFile.empty()) {
    std::ofstream out(c.samplesFile);
    out << samples.dump(1) << "\n";
    DTRAIN_CHECK(out.good(), "calibrate: cannot write --samples ", c.samplesFile);
  }
  progress("done in %.0f s", total.seconds());
  return m;
}

void runCommRank(const std::string& outFile, const std::vector<size_t>& sizes, int ranksPerHost) {
  auto comm = comm::makeCommunicator("mpi");
  const int n = comm->size();
  // Runs of ~0.1 s, the median of 5: on the emulated links a call now and then
  // stalls for milliseconds (as in training), which a step pays on average;
  // runs of 1-2 calls would catch it or not by chance.
  // Where the 5 disagree by more than 10%, 4 more (the median of 9).
  ProbeConfig cfg{.sizes = sizes, .ranksPerHost = ranksPerHost, .secondsPerRun = 0.1, .runs = 5,
                  .spreadForMoreRuns = 1.1, .moreRuns = 4,
                  .hier = ranksPerHost >= 2 && n > ranksPerHost && n % ranksPerHost == 0};
  const ProbeResult r = probeComm(*comm, cfg);
  if (comm->rank() != 0) return;
  std::ofstream out(outFile);
  out << toJson(r).dump() << "\n";
  DTRAIN_CHECK(out.good(), "calibrate: cannot write ", outFile);
}

}  // namespace dtrain::calibrate
