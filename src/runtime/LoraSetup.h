#pragma once
// The --recompute and --lora-* flags (nn/RecomputeModes.h, nn/Lora.h): their checks,
// LoRA's options and checkpoint metadata, and the adapters saved and loaded alone.
// The model is prepared with them in runtime/ModelPipeline.h.
//
// With LoRA, --load names the base model: a plain checkpoint (no adapters) is
// loaded into the model before the adapters are attached, and the run starts
// at step 0 (fine-tuning); a checkpoint of a LoRA run (with adapters) is
// resumed as usual, optimizer state included.
#include <map>
#include <string>

#include "nn/Lora.h"
#include "nn/Module.h"
#include "runtime/TrainConfig.h"

namespace dtrain::runtime {

// Throws UsageError on an unknown --recompute, --lora-rank <= 0, an unknown
// target, --lora-* or adapter files without --lora-rank, or LoRA with a
// strategy that updates every parameter (ps, hogwild).
void validateMemoryOptions(const TrainConfig& c);

// The LoRA settings of a run (rank 0: none); targets default to all the model has.
nn::LoraOptions loraOptions(const TrainConfig& c, nn::Module& model);

// Checkpoint metadata of LoRA runs: lora_rank, lora_alpha, lora_targets (none without LoRA).
std::map<std::string, std::string> loraMetadata(const TrainConfig& c);
// LoRA's scale alpha / r from such metadata; throws dtrain::Error naming `file` when absent.
double loraScaleFromMetadata(const std::map<std::string, std::string>& meta, const std::string& file);

// The adapters alone (their peft names) with loraMetadata; and back onto a
// model with the same adapters attached (every adapter present, same shapes).
void saveAdapters(const std::string& path, const TrainConfig& c, nn::Module& model);
void loadAdapters(const std::string& path, nn::Module& model);

}  // namespace dtrain::runtime
