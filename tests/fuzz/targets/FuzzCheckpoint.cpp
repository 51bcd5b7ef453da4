// Checkpoints into a model and an optimizer (--resume, --load): the reserved
// "dtrain." metadata (step, epoch, RNG state, world size, optimizer name),
// the optimizer's slots and the strategy's state, validated before anything
// is modified.
#include "fuzz/FuzzInput.h"
#include "nn/ModelRegistry.h"
#include "optim/Factory.h"
#include "runtime/Checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain;
  // A small mlp: 4 features, 3 classes; Adam has the most optimizer slots.
  static std::shared_ptr<nn::Module> model = [] {
    nn::DataShape shape;
    shape.sample = {4};
    shape.classes = 3;
    return nn::buildModel("mlp", {}, 1, shape);
  }();
  static std::unique_ptr<optim::Optimizer> adam =
      optim::makeOptimizer("adam", model->namedParameters());
  const std::string& path = fuzz::inputFile(data, size, ".safetensors");
  fuzz::expectErrorsOnly([&] {
    runtime::TrainState state;
    runtime::loadCheckpoint(path, *model, adam.get(), &state);
  });
  return 0;
}
