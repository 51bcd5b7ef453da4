// The classifiers' data by --dataset: synthetic, fashion-mnist, idx (any
// MNIST-format directory) and npy (the user's .npy files), and the shape the
// model is built for, which comes from the training data.
#include <algorithm>
#include <cmath>

#include "core/Error.h"
#include "core/Rng.h"
#include "data/FashionMnist.h"
#include "data/NpyDataset.h"
#include "data/SyntheticDataset.h"
#include "runtime/StreamingData.h"
#include "runtime/Task.h"
#include "runtime/Trainer.h"

namespace dtrain::runtime {
namespace {

data::NpyFiles npyFiles(const TrainConfig& c, bool train) {
  if (train)
    return {c.trainData, c.trainLabels, "--train-data " + c.trainData,
            "--train-labels " + c.trainLabels};
  return {c.testData, c.testLabels, "--test-data " + c.testData, "--test-labels " + c.testLabels};
}

// The training set's sample shape and classes without loading it.
data::DatasetSpec trainingSpec(const TrainConfig& c) {
  if (c.dataset == "npy") return data::npySpec(npyFiles(c, true));
  if (c.dataset == "idx") return data::idxDirectorySpec(c.dataDir);
  return {{1, 28, 28}, 10};  // fashion-mnist and synthetic
}

std::shared_ptr<const data::Dataset> loadSynthetic(const TrainConfig& c, bool train) {
  data::SyntheticConfig sc;
  sc.size = train ? c.syntheticSize : std::max<int64_t>(1, c.syntheticSize / 6);
  sc.seed = 12345;  // the same task for every run; train/test differ by sample index
  auto base = std::make_shared<data::SyntheticDataset>(sc);
  if (train) return base;
  // Test samples: indices past the training range of the same generator.
  data::SyntheticConfig tc = sc;
  tc.size = c.syntheticSize + sc.size;
  auto all = std::make_shared<data::SyntheticDataset>(tc);
  std::vector<int64_t> idx(sc.size);
  for (int64_t i = 0; i < sc.size; ++i) idx[i] = c.syntheticSize + i;
  return std::make_shared<data::SubsetDataset>(all, std::move(idx));
}

// The test set, whose samples must have the training set's shape and whose
// labels must be among its classes (`trainSpec`); null without one.
std::shared_ptr<const data::Dataset> loadTestSet(const TrainConfig& c,
                                                 const data::DatasetSpec& trainSpec) {
  if (c.dataset == "npy") return data::loadNpyDataset(npyFiles(c, false), trainSpec);
  return data::loadIdxDirectory(c.dataDir, false, trainSpec);
}

bool readsFiles(const TrainConfig& c) { return c.dataset == "npy" || c.dataset == "idx"; }

}  // namespace

bool hasTestSet(const TrainConfig& c) {
  if (c.dataset == "memory") return c.memoryTestSet;
  return c.dataset != "npy" || !c.testData.empty();
}

std::shared_ptr<const data::Dataset> loadDataset(const TrainConfig& c, bool train) {
  // "memory": the library's caller handed the data over (api::train); what it
  // did not hand over (a test set) does not exist.
  DTRAIN_CHECK_USAGE(c.dataset != "memory" || !train, "data in memory: no training set was given");
  if (c.dataset == "memory") return nullptr;
  if (c.dataset == "synthetic") return loadSynthetic(c, train);
  if (!train && !hasTestSet(c)) return nullptr;
  if (c.dataset == "npy" && train) return data::loadNpyDataset(npyFiles(c, true));
  if (c.dataset == "idx" && train) return data::loadIdxDirectory(c.dataDir, true);
  if (readsFiles(c)) return loadTestSet(c, trainingSpec(c));
  return data::loadFashionMnist(c.dataDir, train);
}

std::shared_ptr<const data::Dataset> loadTestDataset(const TrainConfig& c,
                                                     const data::Dataset& train) {
  if (!hasTestSet(c)) return nullptr;
  if (readsFiles(c)) return loadTestSet(c, {train.sampleShape(), train.numClasses()});
  return loadDataset(c, false);
}

ValidationSplit splitValidation(const TrainConfig& c, std::shared_ptr<const data::Dataset> full) {
  if (!c.valFraction) return {std::move(full), nullptr};
  const int64_t n = full->size();
  const auto held = static_cast<int64_t>(std::llround(*c.valFraction * static_cast<double>(n)));
  DTRAIN_CHECK_USAGE(held >= 1 && held < n, "--val-fraction ", *c.valFraction, " of ", n,
                     " training samples holds out ", held, held < 1 ? " (none)" : " (all of them)");
  // A seeded draw, not the last samples: files sorted by class would hold out one class.
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  Rng rng(c.seed ^ 0x76616c5f73706c69ULL);  // its own stream: the sampler's shuffles stay as they were
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  std::vector<int64_t> val(order.begin(), order.begin() + held), train(order.begin() + held, order.end());
  std::sort(val.begin(), val.end());  // in file order: reads stay sequential
  std::sort(train.begin(), train.end());
  return {std::make_shared<data::SubsetDataset>(full, std::move(train)),
          std::make_shared<data::SubsetDataset>(full, std::move(val))};
}

nn::DataShape dataShape(const TrainConfig& c, const TaskData& data) {
  if (nn::modelInfo(c.model, modelOverrides(c)).task != nn::kClassificationTask) return {};
  if (const StreamingDataset* streamed = streamingDataset(c.dataset)) return streamed->shape(c, data);
  const data::DatasetSpec s =
      data.train ? data::DatasetSpec{data.train->sampleShape(), data.train->numClasses()}
                 : trainingSpec(c);
  return {s.sampleShape, s.numClasses};
}

}  // namespace dtrain::runtime
