// dtrain's CLI with two models of a user's own registered next to the built-ins:
// "user-mlp" (the mlp's layers, built by the user's code) and "user-lenet"
// (LeNet-5's), so bench/user_model.sh can time them against --model mlp and
// lenet: a user's model must train as fast as the built-in of the same layers.
#include <memory>

#include "cli/Cli.h"
#include "core/Rng.h"
#include "nn/Layers.h"
#include "nn/ModelRegistry.h"

namespace nn = dtrain::nn;

int main(int argc, char** argv) {
  nn::registerModel("user-mlp", nn::classifier([](const nn::DataShape& d, uint64_t seed) {
    dtrain::Rng rng(seed);
    auto m = std::make_shared<nn::Sequential>();
    m->append(std::make_shared<nn::Flatten>());
    m->append(std::make_shared<nn::Linear>(d.sample[0] * d.sample[1] * d.sample[2], 256, rng));
    m->append(std::make_shared<nn::ReLU>());
    m->append(std::make_shared<nn::Linear>(256, 256, rng));
    m->append(std::make_shared<nn::ReLU>());
    m->append(std::make_shared<nn::Linear>(256, d.classes, rng));
    return m;
  }));
  nn::registerModel("user-lenet", nn::classifier([](const nn::DataShape& d, uint64_t seed) {
    dtrain::Rng rng(seed);
    auto m = std::make_shared<nn::Sequential>();
    m->append(std::make_shared<nn::Conv2d>(1, 6, 5, rng, 1, 2));
    m->append(std::make_shared<nn::ReLU>());
    m->append(std::make_shared<nn::MaxPool2d>(2));
    m->append(std::make_shared<nn::Conv2d>(6, 16, 5, rng));
    m->append(std::make_shared<nn::ReLU>());
    m->append(std::make_shared<nn::MaxPool2d>(2));
    m->append(std::make_shared<nn::Flatten>());
    m->append(std::make_shared<nn::Linear>(400, 120, rng));
    m->append(std::make_shared<nn::ReLU>());
    m->append(std::make_shared<nn::Linear>(120, 84, rng));
    m->append(std::make_shared<nn::ReLU>());
    m->append(std::make_shared<nn::Linear>(84, d.classes, rng));
    return m;
  }));
  return dtrain::cli::main(argc, argv);
}
