#pragma once
// Fashion-MNIST (and MNIST, which shares the file layout): 28x28 grey images of 10
// classes, 60000 for training and 10000 for testing, stored as IDX files. Pixels are
// scaled to x / 255 in f32, exactly as the PyTorch peer (bench/torch_train.py) does.
#include <memory>
#include <string>

#include "data/Dataset.h"

namespace dtrain::data {

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads {train,t10k}-images-idx3-ubyte and {train,t10k}-labels-idx1-ubyte from `dir`,
// each gzip compressed (".gz") or raw. Samples are {1, 28, 28}.
// Throws UsageError when the directory or a file is missing (saying how to get the
// data), dtrain::Error when a file is corrupt or images and labels disagree.
std::shared_ptr<TensorDataset> loadFashionMnist(const std::string& dir = kFashionMnistDir,
                                                bool train = true);

// Loads an images file [N, rows, cols] and a labels file [N] (labels < numClasses)
// as samples {1, rows, cols}.
std::shared_ptr<TensorDataset> loadIdxDataset(const std::string& imagesPath,
                                              const std::string& labelsPath, int numClasses);

}  // namespace dtrain::data
