#include "data/NpyDataset.h"

#include "core/Error.h"
#include "data/FiniteFeatures.h"
#include "data/NpyFile.h"

namespace dtrain::data {
namespace {

std::string nameOf(const std::string& path, const std::string& name) {
  return name.empty() ? "file " + path : name;
}

Shape sampleShapeOf(const Shape& arrayShape) {
  if (arrayShape.size() <= 1) return {1};  // [N]: one feature per sample
  return Shape(arrayShape.begin() + 1, arrayShape.end());
}

}  // namespace

DatasetSpec npySpec(const NpyFiles& train) {
  const NpyHeader h = readNpyHeader(train.features, train.featuresName);
  return {sampleShapeOf(h.shape), classCount(readNpyLabels(train.labels, train.labelsName))};
}

std::shared_ptr<TensorDataset> loadNpyDataset(const NpyFiles& files, const DatasetSpec& expected) {
  const std::string features = nameOf(files.features, files.featuresName);
  const std::string labelsWho = nameOf(files.labels, files.labelsName);
  Tensor x = readNpyFeatures(files.features, files.featuresName);
  requireFiniteFeatures(x, features);
  const std::vector<int32_t> labels = readNpyLabels(files.labels, files.labelsName);
  const int64_t n = x.size(0);
  DTRAIN_CHECK_USAGE(static_cast<int64_t>(labels.size()) == n, labelsWho, " has ", labels.size(),
                     " labels but ", features, " has ", n, " samples");
  const Shape sample = sampleShapeOf(Shape(x.shape()));
  DTRAIN_CHECK_USAGE(expected.sampleShape.empty() || expected.sampleShape == sample, features,
                     ": samples of shape ", shapeStr(sample), " but the training samples are ",
                     shapeStr(expected.sampleShape));
  const int numClasses = expected.numClasses > 0 ? expected.numClasses : classCount(labels);
  for (size_t i = 0; i < labels.size(); ++i)
    DTRAIN_CHECK_USAGE(labels[i] < numClasses, labelsWho, ": label ", labels[i], " of sample ", i,
                       " is not a class of the training labels [0, ", numClasses, ")");
  return std::make_shared<TensorDataset>(std::move(x), Tensor::fromInts(labels, {n}), numClasses);
}

}  // namespace dtrain::data
