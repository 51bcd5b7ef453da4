#include "api/StrategyRegistry.h"

#include <map>

#include "core/Error.h"

namespace dtrain::api {

// The strategies whose spec lives in their folder (api/StrategyList.inc).
#define DTRAIN_STRATEGY(spec) StrategyEntry spec();
#include "api/StrategyList.inc"
#undef DTRAIN_STRATEGY

std::vector<std::string> trainerGroups(std::vector<std::string> more) {
  std::vector<std::string> g{"model", "data",  "training", "optimizer", "memory", "lora",
                             "checkpoint", "eval", "logging", "faults", "parallel"};
  g.insert(g.end(), more.begin(), more.end());
  return g;
}

std::map<std::string, std::string> noMesh(const std::string& name, std::map<std::string, std::string> ignores) {
  ignores["parallel.pipeline_stages"] =
      "runs its own strategy (data parallel across pipelines); drop --strategy " + name;
  ignores["parallel.tensor_parallel"] =
      "runs its own strategy (data parallel across tensor-parallel groups); drop --strategy " + name;
  return ignores;
}

std::map<std::string, std::string> meshIgnores() {
  return {{"memory.offload", "cannot be combined with --pipeline-stages or --tensor-parallel yet"},
          {"allreduce.sfb", "cannot be combined with --pipeline-stages or --tensor-parallel (cut "
                            "layers and stage boundaries; plain allreduce data parallelism only)"}};
}

using runtime::TrainConfig;

const char* const kZeroNotHere = "applies to the allreduce strategy and the data-parallel replicas of meshes";
const char* const kOffloadNotHere = "applies to one worker and to the allreduce strategy";
const char* const kNoPeriodicCheckpoints =
    "needs the single, allreduce, pipeline or tensor strategy (this strategy's state is not on "
    "one rank between steps)";

namespace {

const std::map<std::string, StrategyEntry>& registry() {
  static const std::map<std::string, StrategyEntry> r = [] {
    std::map<std::string, StrategyEntry> r;
    auto add = [&r](StrategyEntry e) { r[e.name] = std::move(e); };
#define DTRAIN_STRATEGY(spec) add(spec());
#include "api/StrategyList.inc"
#undef DTRAIN_STRATEGY
    return r;
  }();
  return r;
}

}  // namespace

std::vector<std::string> strategyNames() {
  std::vector<std::string> names;
  for (const auto& [name, e] : registry()) names.push_back(name);
  return names;
}

std::string StrategyEntry::refuses(const Option& o) const {
  if (auto it = ignores.find(o.id()); it != ignores.end()) return it->second;
  if (auto it = ignores.find(o.group); it != ignores.end()) return it->second;
  for (const auto& g : groups)
    if (g == o.group) return "";
  // Say which strategies do read it.
  std::vector<std::string> readers;
  for (const auto& [other, e] : registry())
    for (const auto& g : e.groups)
      if (g == o.group && !e.ignores.count(o.id()) && !e.ignores.count(o.group)) readers.push_back(other);
  std::string names;
  for (size_t i = 0; i < readers.size(); ++i)
    names += (i == 0 ? "" : i + 1 == readers.size() ? " or " : ", ") + readers[i];
  return "does not apply to --strategy " + name + " (only to --strategy " + names + ")";
}

std::string resolveStrategy(const TrainConfig& c) {
  if (!c.strategy.empty()) return c.strategy;
  if (c.pipelineStages > 1) return "pipeline";  // cuts its stages' layers itself with --tensor-parallel too
  if (c.tensorParallel > 1) return "tensor";
  return c.backend == "mpi" || c.workers > 1 ? "allreduce" : "single";
}

void validateRun(const RunConfig& rc, bool workersKnown) {
  rc.train.validate(workersKnown);
  const StrategyEntry& entry = strategyEntry(rc.train.strategy);
  entry.checkStragglers(rc.train, workersKnown);
  if (entry.validate) entry.validate(rc);
}

const StrategyEntry& strategyEntry(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : strategyNames()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("unknown strategy '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

}  // namespace dtrain::api
