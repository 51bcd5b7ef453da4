#pragma once
// Built-in models: the same networks as ../shared/bench/torch_train.py, with
// parameter names equal to the PyTorch nn.Sequential state_dict keys:
//   mlp:   Flatten, Linear(784,256), ReLU, Linear(256,256), ReLU, Linear(256,10)
//          -> 1.weight [256,784], 1.bias, 3.weight, 3.bias, 5.weight, 5.bias
//          (on other data: Linear(features,256) first and Linear(256,classes) last,
//          the same names)
//   lenet: Conv2d(1,6,5,pad 2), ReLU, MaxPool2d(2), Conv2d(6,16,5), ReLU, MaxPool2d(2),
//          Flatten, Linear(400,120), ReLU, Linear(120,84), ReLU, Linear(84,10)
//          -> 0.weight [6,1,5,5], 3.weight [16,6,5,5], 7.weight [120,400], 9, 11
//          (1x28x28 or 3x28x28 images; Linear(84,classes) last)
#include <memory>
#include <string>
#include <vector>

#include "nn/Layers.h"
#include "nn/ModelRegistry.h"

namespace dtrain::nn {

// Throws UsageError naming the known models on an unknown name, and on data
// the model cannot take (one line saying so).
// mlpHidden: the mlp's hidden widths (empty: 256, 256; --mlp-hidden); the
// layers keep their names (Linear i at index 2 i + 1).
std::shared_ptr<Sequential> makeModel(const std::string& name, uint64_t seed,
                                      const DataShape& data = {},
                                      const std::vector<int64_t>& mlpHidden = {});
const std::vector<std::string>& modelNames();

}  // namespace dtrain::nn
