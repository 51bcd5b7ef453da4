#include "calibrate/CoreSharing.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/Precision.h"
#include "calibrate/Fit.h"
#include "calibrate/ModelTiming.h"
#include "calibrate/Shell.h"
#include "comm/BackendRegistry.h"
#include "core/Error.h"
#include "core/Timer.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::calibrate {

namespace {

// Time from the processes' start to their window: exec, the model built, two
// warm-up steps, with every process of the run competing for the cores.
double startAllowanceS(const CoreSharingConfig& c, int processes) {
  return 0.3 + 0.1 * processes + 0.2 * c.windowS;
}

// The step seconds a process left in `file` (then removed); `who` names it in the error.
double takeSeconds(const std::string& file, const std::string& who) {
  std::ifstream in(file);
  double s = 0;
  DTRAIN_CHECK(in >> s && s > 0, "calibrate: ", who, " left no time in ", file);
  std::remove(file.c_str());
  return s;
}

// `processes` copies at once, each its own step time: the window starts when
// all have had time to build their model and warm up.
std::vector<double> runCopies(const CoreSharingConfig& c, int processes) {
  const double start = epochSeconds() + startAllowanceS(c, processes), end = start + c.windowS;
  char window[64];
  std::snprintf(window, sizeof window, "%.3f,%.3f", start, end);
  std::vector<std::string> outs, commands;
  for (int i = 0; i < processes; ++i) {
    outs.push_back(tempFile("share" + std::to_string(i)));
    commands.push_back(shellQuote(c.self) + " calibrate --internal-share " + shellQuote(outs.back()) +
                       " --internal-model " + shellQuote(c.model) + " --internal-micro-batch " +
                       std::to_string(c.microBatch) + " --internal-window " + window + " --threads " +
                       std::to_string(c.threads) + " --precision " + shellQuote(c.precision));
  }
  runShellAtOnce(commands, "timing " + std::to_string(processes) + " processes of " + c.model + " at once");
  std::vector<double> seconds;
  for (const auto& out : outs) seconds.push_back(takeSeconds(out, "a process timing " + c.model));
  return seconds;
}

// `pairs` pairs of ranks at once, each its own mpirun of the allreduce
// bench: each pair's seconds a sum after the compute.
std::vector<double> runPairs(const PairedSumConfig& c, int pairs) {
  char compute[32];
  std::snprintf(compute, sizeof compute, "%g", c.computeMs);
  std::vector<std::string> outs, commands;
  for (int i = 0; i < pairs; ++i) {
    outs.push_back(tempFile("pair" + std::to_string(i)));
    commands.push_back("mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 " + shellQuote(c.self) +
                       " bench allreduce --backend mpi --min-bytes 65536 --max-bytes 65536 --busy-ms " + compute +
                       " --iters " + std::to_string(c.iters) + " --runs " + std::to_string(c.runs) + " --json > " +
                       shellQuote(outs.back()));
  }
  runShellAtOnce(commands, std::to_string(pairs) + " pairs of ranks summing after compute (dtrain bench allreduce)");
  std::vector<double> seconds;
  for (const auto& out : outs) {
    std::ifstream in(out);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    std::remove(out.c_str());
    DTRAIN_CHECK(!j.is_discarded() && j.contains("rows") && !j["rows"].empty(),
                 "calibrate: dtrain bench allreduce left no JSON result in ", out);
    seconds.push_back(j["rows"][0]["us"].get<double>() * 1e-6);
  }
  return seconds;
}

}  // namespace

std::vector<PairedSumWait> measurePairedSumWaits(const PairedSumConfig& c, int cores) {
  if (cores < 2) return {};
  const double alone = median(runPairs(c, 1));
  std::vector<PairedSumWait> out;
  for (int perCore : {2, 4}) {
    const double shared = median(runPairs(c, perCore * cores / 2));
    out.push_back({static_cast<double>(perCore), std::max(0.0, shared - alone)});
  }
  return out;
}

CoreSharing measureCoreSharing(const CoreSharingConfig& c, int cores) {
  CoreSharing r;
  r.processes = std::max(2, 2 * cores / std::max(1, c.threads));
  r.share = static_cast<double>(r.processes) * c.threads / cores;
  DTRAIN_CHECK(c.aloneStepS > 0, "calibrate: core sharing needs the model's step alone");
  std::vector<double> shared;
  for (int round = 0; round < c.rounds; ++round) shared.push_back(median(runCopies(c, r.processes)));
  r.sharedS = median(shared);
  // Below 1 the processes shared the cores better than the arithmetic: noise.
  r.slowdown = std::max(1.0, r.sharedS / (c.aloneStepS * std::max(1.0, r.share)));
  return r;
}

WaitingSharing measureWaitingSharing(const CoreSharingConfig& c, int cores) {
  WaitingSharing r;
  r.computing = std::max(1, cores / std::max(1, c.threads));
  r.processes = 2 * r.computing;
  DTRAIN_CHECK(c.aloneStepS > 0, "calibrate: waiting beside compute needs the model's step alone");
  char window[32];
  std::snprintf(window, sizeof window, "%g", c.windowS);
  // The transport and the waiting netsim.sh mpirun gives emulated hosts' ranks,
  // over the loopback only: an emulated host's bridge that goes away while the
  // ranks run (another job's netsim.sh down) must not be one of their routes.
  const std::string command = "mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl tcp,self "
                              "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "
                              "--mca mpi_yield_when_idle 1 -np " + std::to_string(r.processes) + " " +
                              shellQuote(c.self) + " calibrate --internal-wait-share ";
  std::vector<double> shared;
  for (int round = 0; round < c.rounds; ++round) {
    const std::string out = tempFile("waitshare");
    runShell(command + shellQuote(out) + " --internal-model " + shellQuote(c.model) + " --internal-micro-batch " +
                 std::to_string(c.microBatch) + " --internal-computing " + std::to_string(r.computing) +
                 " --internal-window-s " + window + " --threads " + std::to_string(c.threads) + " --precision " +
                 shellQuote(c.precision),
             "timing " + c.model + " beside MPI ranks waiting (mpirun -np " + std::to_string(r.processes) + ")");
    shared.push_back(takeSeconds(out, "the ranks timing " + c.model + " beside waiting ones"));
  }
  r.sharedS = median(shared);
  r.slowdown = std::max(1.0, r.sharedS / c.aloneStepS);
  return r;
}

void runWaitingShareRank(const std::string& outFile, const std::string& model, int64_t microBatch, int threads,
                         const std::string& precision, int computing, double windowS) {
  DTRAIN_CHECK_USAGE(microBatch >= 1 && windowS > 0 && computing >= 1,
                     "calibrate --internal-wait-share: bad micro-batch, window or computing ranks");
  auto comm = comm::makeCommunicator("mpi");
  const int n = comm->size(), rank = comm->rank();
  DTRAIN_CHECK(computing < n, "calibrate --internal-wait-share: ", computing, " computing ranks of ", n,
               " leave none waiting");
  // Every rank started (MPI's start-up competes for the cores): rank 0's
  // clock sets the window, a little ahead for the model to be built.
  int64_t startUs = rank == 0 ? static_cast<int64_t>((epochSeconds() + 0.3) * 1e6) : 0;
  comm->allreduce(&startUs, &startUs, 1, DType::I64);
  const double start = static_cast<double>(startUs) * 1e-6;
  std::vector<float> steps(static_cast<size_t>(n), 0.0f);
  if (rank < computing) {
    kernels::configureKernels(threads, kernels::GemmBackend::Auto);
    autograd::PrecisionScope scope(autograd::parsePrecision(precision));
    steps[rank] = profileModel({.model = model, .microBatch = microBatch, .repeats = 1, .windowStartS = start,
                                .windowEndS = start + windowS})
                      .wallStepS;  // (float: a step's seconds to 7 digits)
  }
  // The waiting ranks sit in this sum from the start until the computing ones end.
  comm->allreduce(steps.data(), steps.data(), steps.size(), DType::F32);
  if (rank != 0) return;
  const std::vector<double> computed(steps.begin(), steps.begin() + computing);
  std::ofstream out(outFile);
  out << median(computed) << "\n";
  DTRAIN_CHECK(out.good(), "calibrate: cannot write ", outFile);
}

void runShareRank(const std::string& outFile, const std::string& model, int64_t microBatch, int threads,
                  const std::string& precision, double startS, double endS) {
  DTRAIN_CHECK_USAGE(microBatch >= 1 && endS > startS, "calibrate --internal-share: bad micro-batch or window");
  kernels::configureKernels(threads, kernels::GemmBackend::Auto);
  autograd::PrecisionScope scope(autograd::parsePrecision(precision));
  const ModelTimes t =
      profileModel({.model = model, .microBatch = microBatch, .repeats = 1, .windowStartS = startS, .windowEndS = endS});
  std::ofstream out(outFile);
  out << t.wallStepS << "\n";
  DTRAIN_CHECK(out.good(), "calibrate: cannot write ", outFile);
}

}  // namespace dtrain::calibrate
