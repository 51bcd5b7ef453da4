// Uses dtrain as an installed library: a small MLP from dtrain's layers, one
// forward and backward pass and one SGD step on a fixed batch. Prints both
// losses; exits 1 unless they are finite and the step lowered the loss.
#include <dtrain/autograd/Ops.h>
#include <dtrain/core/Rng.h>
#include <dtrain/nn/Layers.h>
#include <dtrain/optim/Sgd.h>
#include <dtrain/tensor/Tensor.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

using namespace dtrain;

int main() {
  Rng rng(7);
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8, rng), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(8, 3, rng)});

  std::vector<float> x(6 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i));
  Tensor inputs = Tensor::fromVector(x, {6, 4});
  Tensor labels = Tensor::fromInts({0, 1, 2, 0, 1, 2}, {6});

  optim::Sgd sgd(model->namedParameters(), optim::SgdOptions{.lr = 0.1});
  autograd::Variable loss = autograd::crossEntropy(model->forward(autograd::Variable(inputs)), labels);
  loss.backward();
  sgd.step();
  float before = loss.item();
  float after = autograd::crossEntropy(model->forward(autograd::Variable(inputs)), labels).item();
  std::printf("loss %.6f -> %.6f after one SGD step\n", before, after);
  return std::isfinite(before) && std::isfinite(after) && after < before ? 0 : 1;
}
