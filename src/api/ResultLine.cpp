#include "api/ResultLine.h"

#include "api/ConfigFile.h"
#include "api/PrepareConfig.h"
#include "api/StrategyRegistry.h"
#include "runtime/ThreadCount.h"

namespace dtrain::api {

void addRunFields(nlohmann::json& out, const RunConfig& rc, int workers,
                  const std::string& backend) {
  const runtime::TrainConfig& c = rc.train;
  nlohmann::json config = nlohmann::json::object();
  for (const auto& [o, v] : usedValues(rc)) {
    config[o->group][o->key] = toJson(v);
    if (!o->resultKey.empty()) out[o->resultKey] = config[o->group][o->key];
  }
  out["workers"] = workers;
  out["strategy"] = c.strategy;
  out["backend"] = backend;
  out["omp_wait_policy"] = runtime::openMpWaitPolicy();
  // A pipeline's stages of one replica share its batch, and so do a Megatron
  // tensor-parallel group's ranks (krizhevsky: each reads its own).
  const bool krizhevsky = c.tensorParallel > 1 && c.tensorParallelStyle == "krizhevsky";
  const int64_t replicas = strategyEntry(c.strategy).batchIsGlobal
                               ? 1
                               : workers / c.pipelineStages / (krizhevsky ? 1 : c.tensorParallel);
  if (workers > 1 || backend == "mpi") out["global_batch"] = c.batchSize * c.accumulate * replicas;
  if (krizhevsky) out["tensor_parallel_style"] = c.tensorParallelStyle;
  out["config"] = std::move(config);
}

}  // namespace dtrain::api
