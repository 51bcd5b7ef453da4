#pragma once
// How a run gets its model, one visible step after another (each a function
// below, called in this order by prepareModel):
//
//   build              the --model with its architecture flags and --seed
//   mark recompute     --recompute: the modules whose activations are recomputed
//   read checkpoint    --load, read once (and checked to hold this --model)
//   load base weights  a LoRA run's --load without adapters is its base model:
//                      model only, before the adapters exist (fine-tuning at step 0)
//   attach LoRA        --lora-rank: frozen base, trainable adapters
//   load adapters      --load-adapters
//
// Recomputation is marked before the adapters are attached: "--recompute all"
// recomputes each block's sub-layers, and an adapted Linear must stay one unit
// rather than become the parent of its two adapters.
//
// Any other --load (a checkpoint of the run itself, adapters included) is the
// state the run resumes from: the trainer loads it, optimizer and training
// state with the weights, once the optimizer exists, from the file read here.
#include <memory>
#include <optional>

#include "nn/ModelRegistry.h"
#include "nn/Module.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainConfig.h"

namespace dtrain::runtime {

struct PreparedModel {
  std::shared_ptr<nn::Module> model;  // from the registry (nn/ModelRegistry.h)
  // --load as read by the pipeline, when the run resumes from it (empty: no
  // --load, or it was the LoRA base and is in the model already).
  std::optional<SafetensorsFile> resumeFrom;
};

// `data`: the classifiers' sample shape and classes (runtime::dataShape).
PreparedModel prepareModel(const TrainConfig& config, const nn::DataShape& data = {});

// The steps, for callers that need only some (e.g. a global model without LoRA).
std::shared_ptr<nn::Module> buildModel(const TrainConfig& config, const nn::DataShape& data = {});
void markRecompute(const TrainConfig& config, nn::Module& model);
// Empty without --load; throws UsageError when the file names another model.
std::optional<SafetensorsFile> readCheckpoint(const TrainConfig& config);
// True when it loaded `checkpoint` (the LoRA base), which the run then no longer resumes from.
bool loadBaseWeights(const TrainConfig& config, const SafetensorsFile& checkpoint, nn::Module& model);
void attachLora(const TrainConfig& config, nn::Module& model);
void loadAdapterWeights(const TrainConfig& config, nn::Module& model);

}  // namespace dtrain::runtime
