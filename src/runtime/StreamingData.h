#pragma once
// Datasets streamed from files rather than loaded whole (--dataset shards; later tokens,
// imagefolder): a registry by name, so that loading the data, the model's input shape and
// the task find a kind without comparing names. In-memory datasets keep their loaders
// (runtime/ClassificationData.cpp).
#include <memory>
#include <string>
#include <vector>

#include "runtime/Task.h"

namespace dtrain::runtime {

struct StreamingDataset {
  const char* task;  // the model task it feeds (nn::kClassificationTask ...)
  // Fills `data` with what every rank of this process shares (the scans).
  void (*load)(const TrainConfig& config, bool withTest, TaskData& data);
  nn::DataShape (*shape)(const TrainConfig& config, const TaskData& data);
  std::unique_ptr<Task> (*makeTask)(const TaskContext& context, const TaskData& data);
  void (*check)(const TrainConfig& config);  // the flags it needs (UsageError)
  // Streams samples through loader threads and a shuffle buffer (--loader-threads,
  // --shuffle-buffer, --skip-bad-samples apply).
  bool streamsSamples;
};

// Null for a dataset that is not streamed.
const StreamingDataset* streamingDataset(const std::string& name);
std::vector<std::string> streamingDatasetNames();

// --dataset shards (runtime/ShardTask.cpp).
StreamingDataset shardsDataset();
// --dataset imagefolder (runtime/ShardTask.cpp).
StreamingDataset imageFolderDataset();
// --dataset tokens (runtime/TokenTask.cpp).
StreamingDataset tokensDataset();

}  // namespace dtrain::runtime
