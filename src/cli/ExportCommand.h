#pragma once
// `dtrain export --merge-lora IN OUT [--adapters FILE]`: folds a LoRA run's
// adapters into their base weights (W += alpha/r x B A) and writes a plain
// checkpoint: the model's tensors under their usual names (gpt: nanoGPT's
// state_dict keys, loadable by ../shared/bench/torch_gpt.py's model), without
// adapters, optimizer or strategy state. IN is a LoRA run's --save, or a base
// checkpoint with --adapters (a --save-adapters file).
#include <CLI/CLI.hpp>

namespace dtrain::cli {

void addExportCommand(CLI::App& app);

}  // namespace dtrain::cli
