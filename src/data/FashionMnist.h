#pragma once
// Fashion-MNIST (and MNIST, which shares the file layout): 28x28 grey images of 10
// classes, 60000 for training and 10000 for testing, stored as IDX files. Pixels are
// scaled to x / 255 in f32, exactly as the PyTorch peer (bench/torch_train.py) does.
// Any directory of MNIST-format files (--dataset idx) loads the same way, its image
// size and class count taken from the files.
#include <memory>
#include <string>

#include "data/Dataset.h"

namespace dtrain::data {

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads {train,t10k}-images-idx3-ubyte and {train,t10k}-labels-idx1-ubyte from `dir`,
// each gzip compressed (".gz") or raw. Samples are {1, 28, 28}.
// Throws UsageError when the directory or a file is missing (saying how to get the
// data), or a file is corrupt, or images and labels disagree.
std::shared_ptr<TensorDataset> loadFashionMnist(const std::string& dir = kFashionMnistDir,
                                                bool train = true);

// The same files of any MNIST-format directory, images [N, rows, cols] as samples
// {1, rows, cols}. numClasses 0 counts the classes as 1 + the largest label (the
// training set); a test set passes the training set's spec, whose sample shape
// its images must have and whose classes its labels must be in.
std::shared_ptr<TensorDataset> loadIdxDirectory(const std::string& dir, bool train,
                                                const DatasetSpec& expected = {});
// The training set's spec of `dir` (its images' header and its labels only).
DatasetSpec idxDirectorySpec(const std::string& dir);

// Loads an images file [N, rows, cols] and a labels file [N] (labels < numClasses,
// or any when numClasses is 0: then 1 + the largest label) as samples {1, rows, cols}.
std::shared_ptr<TensorDataset> loadIdxDataset(const std::string& imagesPath,
                                              const std::string& labelsPath, int numClasses);

}  // namespace dtrain::data
