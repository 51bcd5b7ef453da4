// A classifier on the program's own arrays: two interleaved spirals (2 features,
// 2 classes) made in memory, handed to dtrain as tensors and learnt by the
// built-in mlp (its first layer takes the data's 2 features, its last the 2
// classes) with 2 allreduce workers; the options come from a TOML string, as
// they would from a file.
//   ./own_arrays [max_steps]      (default 600)
#include <dtrain/dtrain.h>

#include <cmath>
#include <cstdlib>
#include <iostream>

namespace data = dtrain::data;

// n points of each of two spirals, shuffled by a fixed seed.
std::shared_ptr<data::Dataset> spirals(int64_t n, uint64_t seed) {
  dtrain::Tensor x = dtrain::Tensor::empty({2 * n, 2}, dtrain::DType::F32);
  dtrain::Tensor y = dtrain::Tensor::empty({2 * n}, dtrain::DType::I32);
  dtrain::Rng rng(seed);
  for (int64_t i = 0; i < 2 * n; ++i) {
    const int cls = static_cast<int>(i % 2);
    const double t = 1.0 + 3.0 * rng.uniform();  // radius and angle grow together
    const double angle = t * 2.0 + cls * M_PI;
    x.data<float>()[2 * i] = static_cast<float>(t * std::cos(angle) / 4 + 0.05 * rng.normal());
    x.data<float>()[2 * i + 1] = static_cast<float>(t * std::sin(angle) / 4 + 0.05 * rng.normal());
    y.data<int32_t>()[i] = cls;
  }
  return std::make_shared<data::TensorDataset>(x, y, 2);
}

int main(int argc, char** argv) try {
  dtrain::api::RunConfig config = dtrain::api::configFromToml(R"(
[model]
name = "mlp"
[optimizer]
name = "adam"
lr = 0.01
[training]
batch_size = 32
epochs = 1000
[parallel]
workers = 2
)");
  config.train.maxSteps = argc > 1 ? std::atoi(argv[1]) : 600;
  dtrain::api::Data arrays;
  arrays.train = spirals(2000, 1);
  arrays.test = spirals(500, 2);
  const auto result = dtrain::api::train(config, arrays);
  std::cout << result.dump() << "\n";
  std::cerr << "test accuracy " << result.value("test_accuracy", 0.0) << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "own_arrays: " << e.what() << "\n";
  return dynamic_cast<const dtrain::UsageError*>(&e) ? 2 : 1;
}
