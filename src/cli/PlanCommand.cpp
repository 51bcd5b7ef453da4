#include "cli/PlanCommand.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "api/ConfigFile.h"
#include "cli/SbatchScript.h"
#include "core/Error.h"
#include "plan/LossyCosts.h"
#include "plan/Planner.h"

namespace dtrain::cli {

namespace {

struct PlanFlags {
  std::string model, globalBatch, machine, memory, writeConfig, writeSbatch, base;
  int hosts = 1, ranksPerHost = 1;
  int top = 10;
  bool allowLossy = false, json = false;
};

// "12e9", "16GiB", "80GB", "512MiB" -> bytes.
double parseBytes(const std::string& text) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError("--memory-per-rank " + text + ": not a size (e.g. 16GiB, 80GB, 12e9)");
  }
  const std::string unit = text.substr(used);
  const std::pair<const char*, double> units[] = {{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
                                                  {"KiB", 1024.0}, {"MiB", 1048576.0},
                                                  {"GiB", 1073741824.0}};
  for (const auto& [name, factor] : units)
    if (unit == name) {
      DTRAIN_CHECK_USAGE(x > 0, "--memory-per-rank must be > 0 (got ", text, ")");
      return x * factor;
    }
  throw UsageError("--memory-per-rank " + text + ": unknown unit '" + unit + "' (B, KB, MB, GB, KiB, MiB, GiB)");
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

void printRow(size_t i, const plan::Candidate& c) {
  std::printf("%3zu  %12.1f  %10.2f  %12s  %-26s %s\n", i + 1, c.prediction.samplesPerS, 1e3 * c.prediction.stepS,
              mib(c.peakBytes).c_str(), c.prediction.dominant.c_str(), c.summary.c_str());
}

// The batch script of the best configuration: its ranks as SLURM tasks (one
// process whose ranks are threads where the plan chose the local backend).
void writeSbatch(const PlanFlags& f, const plan::Candidate& best) {
  SbatchJob job;
  job.mpi = best.config.train.backend == "mpi";
  job.nodes = job.mpi ? f.hosts : 1;
  job.tasksPerNode = job.mpi ? f.ranksPerHost : 1;
  job.cpusPerTask = job.mpi ? 1 : f.ranksPerHost;
  job.summary = best.summary + ", " + std::to_string(f.hosts) + " x " + std::to_string(f.ranksPerHost) + " ranks";
  job.configToml = api::configToToml(best.config);
  std::ofstream out(f.writeSbatch);
  out << sbatchScript(job);
  out.close();
  DTRAIN_CHECK_USAGE(out.good(), "--write-sbatch ", f.writeSbatch, ": cannot be written");
}

void runPlan(const PlanFlags& f) {
  plan::PlanRequest r;
  r.model = f.model;
  const bool autoBatch = f.globalBatch == "auto";
  if (!autoBatch) try {
      size_t used = 0;
      r.globalBatch = std::stoll(f.globalBatch, &used);
      DTRAIN_CHECK_USAGE(used == f.globalBatch.size(), "");
    } catch (const std::exception&) {
      throw UsageError("--global-batch " + f.globalBatch + ": not an integer (or auto)");
    }
  r.hosts = f.hosts;
  r.ranksPerHost = f.ranksPerHost;
  r.allowLossy = f.allowLossy;
  if (!f.memory.empty()) r.memoryPerRank = parseBytes(f.memory);
  if (!f.base.empty()) {
    api::loadConfigFile(f.base, r.base, r.baseSources);
  }
  const plan::Machine machine = plan::readMachine(f.machine);
  std::string autoNote;
  plan::PlanResult res;
  if (autoBatch) {
    plan::AutoBatch a = plan::autoGlobalBatch(r, machine);
    DTRAIN_CHECK_USAGE(a.globalBatch > 0, "--global-batch auto: not even one sample per rank fits ",
                       r.memoryPerRank > 0 ? mib(r.memoryPerRank) : mib(static_cast<double>(machine.memoryPerDeviceBytes)),
                       " per rank on ", f.hosts, " x ", f.ranksPerHost, " ranks");
    r.globalBatch = a.globalBatch;
    res = std::move(a.result);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "global batch auto: %lld, the largest that fits the memory per rank (%d searches); "
                  "lr %g = %g x %lld / %lld (linear scaling rule), warmup %lld steps (%s; Goyal et al. 2017)",
                  static_cast<long long>(a.globalBatch), a.plans, a.lr, a.baseLr,
                  static_cast<long long>(a.globalBatch), static_cast<long long>(a.referenceBatch),
                  static_cast<long long>(a.warmupSteps), a.warmupFromEpochs ? "5 epochs" : "the dataset's size unknown");
    autoNote = buf;
  } else {
    res = plan::plan(r, machine);
  }
  std::vector<const plan::Candidate*> chosen, lossy;
  for (const auto& c : res.ranked) (c.lossy.empty() || f.allowLossy ? chosen : lossy).push_back(&c);
  DTRAIN_CHECK_USAGE(!chosen.empty(), "no configuration of --model ", f.model, " fits ",
                     r.memoryPerRank > 0 ? mib(r.memoryPerRank) : mib(static_cast<double>(machine.memoryPerDeviceBytes)),
                     " per rank on ", f.hosts, " x ", f.ranksPerHost, " ranks (", res.enumerated,
                     " tried, ", res.tooBig, " too big)");
  if (!f.writeConfig.empty()) {
    std::ofstream out(f.writeConfig);
    DTRAIN_CHECK_USAGE(out.good(), "--write-config ", f.writeConfig, ": cannot be written");
    out << "# dtrain plan's choice: " << chosen[0]->summary << "\n";
    if (!autoNote.empty()) out << "# " << autoNote << "\n";
    out << "# predicted "
        << chosen[0]->prediction.samplesPerS << " samples/s on " << machine.name << "\n"
        << api::configToToml(chosen[0]->config);
  }
  if (!f.writeSbatch.empty()) writeSbatch(f, *chosen[0]);
  const size_t k = static_cast<size_t>(std::max(1, f.top));
  if (f.json) {
    // The K best, then (without --allow-lossy) the K best lossy ones, marked "lossy".
    for (const auto* list : {&chosen, &lossy})
      for (size_t i = 0; i < list->size() && i < k; ++i) {
        const auto& c = *(*list)[i];
        nlohmann::json line = plan::predictionJson(c.prediction);
        line["rank"] = i + 1;
        line["summary"] = c.summary;
        if (!c.lossy.empty()) {
          line["lossy"] = c.lossy;
          const std::string cost = plan::measuredAccuracyCost(c.config.train);
          line["accuracy_cost"] = cost.empty() ? "not measured" : cost;
        }
        if (autoBatch) line["global_batch_auto"] = autoNote;
        line["config"] = api::configToToml(c.config);
        std::cout << line.dump() << "\n";
      }
    std::cout.flush();
    return;
  }
  std::printf("dtrain plan: %s, global batch %lld, %d hosts x %d ranks on %s\n", f.model.c_str(),
              static_cast<long long>(r.globalBatch), f.hosts, f.ranksPerHost, machine.name.c_str());
  if (!autoNote.empty()) std::printf("%s\n", autoNote.c_str());
  std::printf("%lld configurations tried in %.2f s: %lld refused by the configuration checker, %lld over "
              "the memory limit, %zu ranked\n\n",
              static_cast<long long>(res.enumerated), res.seconds, static_cast<long long>(res.rejected),
              static_cast<long long>(res.tooBig), res.ranked.size());
  std::printf("  #     samples/s     step ms   peak memory  why (dominant term)        configuration\n");
  // A lossy row's price, where PERFORMANCE.md measured it, on the line below it.
  auto printCost = [](const plan::Candidate& c) {
    if (c.lossy.empty()) return;
    const std::string cost = plan::measuredAccuracyCost(c.config.train);
    std::printf("        %s\n", cost.empty() ? "accuracy cost: not measured" : cost.c_str());
  };
  for (size_t i = 0; i < chosen.size() && i < k; ++i) {
    printRow(i, *chosen[i]);
    printCost(*chosen[i]);
  }
  if (!lossy.empty()) {
    std::printf("\nLossy (they change what is learned; --allow-lossy ranks them with the others):\n");
    for (size_t i = 0; i < lossy.size() && i < std::min<size_t>(k, 5); ++i) {
      printRow(i, *lossy[i]);
      printCost(*lossy[i]);
    }
  }
  if (!f.writeConfig.empty()) std::printf("\nwrote %s (dtrain train --config %s)\n", f.writeConfig.c_str(), f.writeConfig.c_str());
  if (!f.writeSbatch.empty()) std::printf("wrote %s (sbatch %s)\n", f.writeSbatch.c_str(), f.writeSbatch.c_str());
}

}  // namespace

void addPlanCommand(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Rank every configuration of a model on a cluster by predicted samples/s");
  sub->add_option("--model", flags->model, "The model (mlp, gpt-tiny, gpt-small, gpt-base...)")->required();
  sub->add_option("--global-batch", flags->globalBatch, "Samples per optimizer step, all ranks; auto: the largest that fits --memory-per-rank "
                  "(lr scaled linearly, with a warmup)")->required();
  sub->add_option("--hosts", flags->hosts, "Hosts (more than one: backend mpi)")->check(CLI::PositiveNumber);
  sub->add_option("--ranks-per-host", flags->ranksPerHost, "Ranks on each host")->check(CLI::PositiveNumber);
  sub->add_option("--machine", flags->machine, "Machine file (docs/guide/machine-files.md)")->required();
  sub->add_option("--memory-per-rank", flags->memory,
                  "Memory limit per rank (e.g. 16GiB; default: the machine file's memory per device)");
  sub->add_option("--config", flags->base, "Options every candidate starts from (TOML: optimizer, data...)");
  sub->add_flag("--allow-lossy", flags->allowLossy,
                "Rank compression, asynchronous ps, Hogwild! and local SGD with the others");
  sub->add_option("--top", flags->top, "Rows (JSON lines) to print")->check(CLI::PositiveNumber);
  sub->add_flag("--json", flags->json, "One JSON line per candidate, with its configuration as TOML");
  sub->add_option("--write-config", flags->writeConfig, "Write the best configuration (dtrain train --config)");
  sub->add_option("--write-sbatch", flags->writeSbatch,
                  "Write a SLURM batch script that runs the best configuration (docs/guide/slurm.md)");
  sub->callback([flags] { runPlan(*flags); });
}

}  // namespace dtrain::cli
