#include "runtime/ModelPipeline.h"

#include "core/Error.h"
#include "core/Memory.h"
#include "nn/Lora.h"
#include "nn/ModelRegistry.h"
#include "nn/RecomputeModes.h"
#include "runtime/Checkpoint.h"
#include "runtime/LoraSetup.h"
#include "runtime/Task.h"

namespace dtrain::runtime {

std::shared_ptr<nn::Module> buildModel(const TrainConfig& c, const nn::DataShape& data) {
  memory::CategoryScope accounted(memory::Category::Parameters);  // memory_per_rank
  return nn::buildModel(c.model, modelOverrides(c), c.seed, data);
}

void markRecompute(const TrainConfig& c, nn::Module& model) { nn::applyRecompute(model, c.recompute); }

std::optional<SafetensorsFile> readCheckpoint(const TrainConfig& c) {
  if (c.load.empty()) return std::nullopt;
  SafetensorsFile file = loadSafetensors(c.load);
  // dtrain's checkpoints name their model (modelMetadata); a file without the
  // name (a torch state_dict) is judged by its tensors in loadCheckpoint.
  auto saved = file.metadata.find("model");
  DTRAIN_CHECK_USAGE(saved == file.metadata.end() || saved->second == c.model, "--load ", c.load,
                     " holds a ", saved->second, " checkpoint, not ", c.model);
  return file;
}

bool loadBaseWeights(const TrainConfig& c, const SafetensorsFile& checkpoint, nn::Module& model) {
  if (!c.loraRank) return false;
  for (const auto& [name, t] : checkpoint.tensors)
    if (nn::isLoraParameter(name)) return false;  // a LoRA run's own checkpoint: resumed
  loadCheckpoint(checkpoint, c.load, model, nullptr, nullptr);
  return true;
}

void attachLora(const TrainConfig& c, nn::Module& model) {
  if (!c.loraRank) return;
  memory::CategoryScope accounted(memory::Category::Parameters);
  nn::applyLora(model, c.model, loraOptions(c, model), c.seed);
}

void loadAdapterWeights(const TrainConfig& c, nn::Module& model) {
  if (!c.loadAdapters.empty()) loadAdapters(c.loadAdapters, model);
}

PreparedModel prepareModel(const TrainConfig& c, const nn::DataShape& data) {
  PreparedModel p;
  p.model = buildModel(c, data);
  markRecompute(c, *p.model);
  p.resumeFrom = readCheckpoint(c);
  if (p.resumeFrom && loadBaseWeights(c, *p.resumeFrom, *p.model)) p.resumeFrom.reset();
  attachLora(c, *p.model);
  loadAdapterWeights(c, *p.model);
  return p;
}

}  // namespace dtrain::runtime
