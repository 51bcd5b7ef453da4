// LoRA fine-tuning of gpt-small on the user's own text file: the base model's
// weights stay frozen, rank-8 adapters of the attention and MLP layers train,
// and the adapters alone are saved (dtrain export --merge-lora folds them in).
//   ./lora_finetune TEXT_FILE [BASE.safetensors] [STEPS] [ADAPTERS_OUT]
// Without a base checkpoint it fine-tunes a freshly initialised gpt-small (to
// try the pipeline; a real base comes from `dtrain train --model gpt-small --save`).
#include <dtrain/dtrain.h>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::cerr << "usage: lora_finetune TEXT_FILE [BASE.safetensors] [STEPS] [ADAPTERS_OUT]\n";
    return 2;
  }
  dtrain::api::RunConfig config;
  config.train.model = "gpt-small";
  config.train.dataset = "text";
  config.train.textFile = argv[1];
  if (argc > 2 && std::string(argv[2]) != "-") config.train.load = argv[2];  // the base model
  config.train.maxSteps = argc > 3 ? std::atoi(argv[3]) : 200;
  config.train.saveAdapters = argc > 4 ? argv[4] : "adapters.safetensors";
  config.train.loraRank = 8;
  config.train.lr = 3e-3;
  config.train.batchSize = 8;
  config.train.evalBatches = 4;
  const auto result = dtrain::api::train(config);
  std::cout << result.dump() << "\n";
  std::cerr << "validation loss " << result.value("val_loss", 0.0) << ", adapters in "
            << config.train.saveAdapters << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "lora_finetune: " << e.what() << "\n";
  return dynamic_cast<const dtrain::UsageError*>(&e) ? 2 : 1;
}
