// A residual CNN of the user's own, trained on Fashion-MNIST with allreduce data
// parallelism over 2 workers (threads), through dtrain's library API.
//   ./residual_cnn [epochs] [max_steps]      (defaults: 1 epoch, no step limit)
//   ./residual_cnn train --model residual-cnn --workers 2 ...   (dtrain's own CLI, this model in it)
// Prints the result line dtrain's CLI prints, and the test accuracy.
#include <dtrain/dtrain.h>

#include <cstdlib>
#include <iostream>

using dtrain::autograd::Variable;
namespace nn = dtrain::nn;
namespace ag = dtrain::autograd;

// x + conv(relu(conv(x))), then ReLU: the block of He et al. without normalisation.
class ResidualBlock : public nn::Module {
 public:
  ResidualBlock(int64_t channels, dtrain::Rng& rng)
      : conv1_(std::make_shared<nn::Conv2d>(channels, channels, 3, rng, 1, 1)),
        conv2_(std::make_shared<nn::Conv2d>(channels, channels, 3, rng, 1, 1)) {
    registerModule("conv1", conv1_);
    registerModule("conv2", conv2_);
  }
  Variable forward(const Variable& x) override {
    return ag::relu(ag::add(x, (*conv2_)(ag::relu((*conv1_)(x)))));
  }
  std::string describe() const override { return "ResidualBlock"; }

 private:
  std::shared_ptr<nn::Conv2d> conv1_, conv2_;
};

// stem conv -> 2 residual blocks -> pool -> linear classifier, for any C x H x W input.
std::shared_ptr<nn::Module> residualCnn(const nn::DataShape& data, uint64_t seed) {
  dtrain::Rng rng(seed);
  const int64_t channels = 16;
  auto net = std::make_shared<nn::Sequential>();
  net->append(std::make_shared<nn::Conv2d>(data.sample[0], channels, 3, rng, 1, 1));
  net->append(std::make_shared<nn::ReLU>());
  net->append(std::make_shared<nn::MaxPool2d>(2));
  net->append(std::make_shared<ResidualBlock>(channels, rng));
  net->append(std::make_shared<ResidualBlock>(channels, rng));
  net->append(std::make_shared<nn::MaxPool2d>(2));
  net->append(std::make_shared<nn::Flatten>());
  net->append(std::make_shared<nn::Linear>(channels * (data.sample[1] / 4) * (data.sample[2] / 4),
                                           data.classes, rng));
  return net;
}

int main(int argc, char** argv) try {
  nn::registerModel("residual-cnn", nn::classifier(residualCnn));
  // A command (train, bench, ...): dtrain's CLI and config files, with this model.
  if (argc > 1 && argv[1][0] >= 'a' && argv[1][0] <= 'z') return dtrain::cli::main(argc, argv);
  dtrain::api::RunConfig config;  // the defaults of `dtrain train`, then ours
  config.train.model = "residual-cnn";
  config.train.workers = 2;       // allreduce data parallelism, ranks as threads
  config.train.epochs = argc > 1 ? std::atoi(argv[1]) : 1;
  config.train.maxSteps = argc > 2 ? std::atoi(argv[2]) : 0;
  config.train.lr = 0.05;
  const auto result = dtrain::api::train(config);
  std::cout << result.dump() << "\n";
  std::cerr << "test accuracy " << result.value("test_accuracy", 0.0) << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "residual_cnn: " << e.what() << "\n";
  return dynamic_cast<const dtrain::UsageError*>(&e) ? 2 : 1;
}
