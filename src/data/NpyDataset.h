#pragma once
// A classification data set from two .npy files (--dataset npy): features
// [N, ...] and labels [N] (data/NpyFile.h has the dtypes). Features keep their
// values (float32, float64) or are scaled to x / 255 (uint8); a features array
// [N] gives samples of shape [1]. The classes are 0 .. 1 + the largest
// training label; a test set's labels must be among them and its samples must
// have the training samples' shape.
#include <memory>
#include <string>

#include "data/Dataset.h"

namespace dtrain::data {

struct NpyFiles {
  std::string features, labels;
  // How error messages name each file, e.g. "--train-data x.npy" ("": "file <path>").
  std::string featuresName, labelsName;
};

// The training set's spec: its samples' shape (from the features' header) and
// its classes (from the labels), without reading the features.
DatasetSpec npySpec(const NpyFiles& train);

// Loads `files`; `expected` (a test set's: the training set's spec) fixes the
// sample shape and the classes, empty ones are taken from the files.
std::shared_ptr<TensorDataset> loadNpyDataset(const NpyFiles& files,
                                              const DatasetSpec& expected = {});

}  // namespace dtrain::data
