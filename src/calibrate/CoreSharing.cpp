#include "calibrate/CoreSharing.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/Precision.h"
#include "calibrate/Fit.h"
#include "calibrate/ModelProfile.h"
#include "calibrate/Shell.h"
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
  for (const auto& out : outs) {
    std::ifstream in(out);
    double s = 0;
    DTRAIN_CHECK(in >> s && s > 0, "calibrate: a process timing ", c.model, " left no time in ", out);
    std::remove(out.c_str());
    seconds.push_back(s);
  }
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
