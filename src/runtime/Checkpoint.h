#pragma once
// Checkpoints: one safetensors file holding
//   - the model's parameters and buffers under exactly their module names
//     ("1.weight", "1.running_mean"), so that after dropping the "optimizer."
//     keys the file loads into the equivalent PyTorch nn.Sequential with
//     load_state_dict(strict=True) (see scripts/torch_interop.py);
//   - the optimizer state under "optimizer.<param>.<slot>" (slot = step,
//     momentum_buffer, exp_avg, exp_avg_sq, sum);
//   - the strategy's state under "strategy.<name>" (gradient compression:
//     "strategy.rank1.compress.bucket0.residual");
//   - in the metadata: the training step, epoch, RNG state, optimizer name and
//     step count under reserved "dtrain." keys, plus free-form user metadata.
// A bare PyTorch state_dict saved as safetensors loads too (fresh optimizer, step 0).
#include <cstdint>
#include <map>
#include <string>

#include "core/Rng.h"
#include "nn/Module.h"
#include "optim/Optimizer.h"
#include "runtime/Safetensors.h"

namespace dtrain::runtime {

struct TrainState {
  int64_t step = 0;   // optimizer steps completed
  int64_t epoch = 0;  // epochs completed
  Rng::State rng{};   // the trainer's RNG, so a resumed run draws the same numbers
  // The run that wrote it (0: unknown, a checkpoint from before they were
  // saved): a run resumed with another world size or global batch says so.
  int64_t worldSize = 0;    // data-parallel replicas
  int64_t globalBatch = 0;  // samples per optimizer step
  // Free-form (e.g. "model": "mlp", "config": "..."); keys must not start with "dtrain.".
  std::map<std::string, std::string> metadata;
  // The strategy's state (Strategy::checkpointState), saved as "strategy.<name>".
  std::map<std::string, Tensor> strategyState;
};

// What loadCheckpoint found in the file.
struct CheckpointInfo {
  bool hasTrainState = false;      // false for a bare state_dict: *state got step 0, epoch 0
  bool hasOptimizerState = false;  // false: the optimizer was reset to fresh, step count 0
  std::string optimizerName;       // as saved ("" when none)
};

// Writes the checkpoint atomically (see saveSafetensors). `optimizer` may be
// null (model only). Throws dtrain::Error naming the file.
void saveCheckpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer,
                    const TrainState& state);

// Loads a checkpoint into `model` and, when given, `optimizer` and `state`.
// Every model parameter and buffer must be in the file with the same shape and
// dtype, and the file may hold no other tensors besides "optimizer." ones;
// optimizer state must match the optimizer (same kind, each parameter's state
// complete or absent). Everything is validated before anything is modified, so
// on error the model, optimizer and state are untouched. Throws dtrain::Error:
// "checkpoint X: parameter 1.weight has shape [128, 784], model expects [256, 784]",
// "checkpoint X: missing parameter 3.bias", ...
CheckpointInfo loadCheckpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer* optimizer, TrainState* state);
// The same from a file already read (`path` names it in errors).
CheckpointInfo loadCheckpoint(const SafetensorsFile& file, const std::string& path,
                              nn::Module& model, optim::Optimizer* optimizer, TrainState* state);

}  // namespace dtrain::runtime
