#pragma once
// A task owns what differs between kinds of training: where batches come from,
// the loss, the evaluation and its fields in the metrics and the final JSON
// line. The trainer loop drives any task the same way:
//   beginEpoch(epoch, step); while (nextBatch(b)) { loss(model, x, y) ... }
//   evaluate(model) every --eval-every steps and at the end.
// Tasks register by the name a model's registry entry gives (nn/ModelRegistry.h):
//   classification  Fashion-MNIST or synthetic images, DistributedSampler batches,
//                   test_accuracy and test_loss on the test set.
//   language-model  byte-level text (TextBatcher windows), val_loss (nats per byte)
//                   and val_bpb (bits per byte) on --eval-batches fixed windows.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "autograd/Variable.h"
#include "data/Dataset.h"
#include "data/ShardSet.h"
#include "data/TextCorpus.h"
#include "nn/ModelRegistry.h"
#include "nn/Module.h"
#include "runtime/Checkpoint.h"
#include "runtime/TrainConfig.h"

namespace dtrain::runtime {

// The data a task reads, loaded once per process and shared read-only by the
// ranks of the local backend. Null members are loaded by the task itself.
struct TaskData {
  std::shared_ptr<const data::Dataset> train, test;  // classification
  std::shared_ptr<const data::TextCorpus> text;      // language modeling
  // Sees each --metrics record as it is written (the reporting rank's thread;
  // also without --metrics): Python's on_metrics. Empty: none.
  std::function<void(const nlohmann::json&)> onMetrics;
  // Streamed classification data (--dataset shards): the scanned shard sets.
  std::shared_ptr<const data::ShardSet> trainShards, testShards;
};

// The architecture flags (--n-layer ...) of `config`.
nn::ModelOverrides modelOverrides(const TrainConfig& config);

// The model's name and architecture flags as checkpoint metadata ("model",
// "n_layer", ...), and back: what `dtrain generate` rebuilds the model from.
std::map<std::string, std::string> modelMetadata(const TrainConfig& config);
nn::ModelOverrides overridesFromMetadata(const std::map<std::string, std::string>& metadata);

// The data `config` asks for (test set only when `withTest`).
TaskData loadTaskData(const TrainConfig& config, bool withTest);

// The sample shape and class count a classifier is built for: the training
// set's, from `data.train` when it is loaded, else from the files `config`
// names (their headers and the training labels only). Every rank and every
// strategy builds its model from this. The default for language models.
nn::DataShape dataShape(const TrainConfig& config, const TaskData& data = {});

// Where a task runs: this rank's place and the model's registry facts.
struct TaskContext {
  const TrainConfig& config;
  nn::ModelInfo model;
  int rank = 0;
  int worldSize = 1;
  bool reporter = true;  // evaluates: needs the evaluation data
};

class Task {
 public:
  virtual ~Task() = default;
  // "fashion-mnist (60000 samples)", for the first progress line.
  virtual std::string describeData() const = 0;
  virtual int64_t stepsPerEpoch() const = 0;
  // Samples per optimizer step over every rank (workers x accumulate x batch).
  virtual int64_t globalBatch() const = 0;
  // Positions the batches at global step `step`, which lies in epoch `epoch`.
  virtual void beginEpoch(int64_t epoch, int64_t step) = 0;
  // This rank's batch of the next step (accumulate x batch samples along dim 0);
  // false when the epoch has no more steps.
  virtual bool nextBatch(data::Batch& batch) = 0;
  // After the last step of an epoch (or of training): release what beginEpoch made.
  virtual void endEpoch() {}
  // The mean loss of one micro-batch from the model's output (a pipeline's
  // last stage holds only the output), with its graph for backward.
  virtual autograd::Variable lossFromOutput(const autograd::Variable& output, const Tensor& y) = 0;
  // The mean loss of one micro-batch through the whole model.
  autograd::Variable loss(nn::Module& model, const Tensor& x, const Tensor& y) {
    return lossFromOutput(model.forward(autograd::Variable(x)), y);
  }
  // Evaluation fields for the metrics and the final line, in eval mode, no grad.
  virtual nlohmann::json evaluate(nn::Module& model) = 0;
  // The evaluation as one progress line ("test accuracy 0.8, test loss 0.5").
  virtual std::string describeEvaluation(const nlohmann::json& fields) const = 0;
  // Fields the final line adds besides the evaluation (e.g. tokens_per_s).
  virtual nlohmann::json finalFields(double samplesPerS) const { return nlohmann::json::object(); }
  // Resuming from a checkpoint: the global step to go on from, and whether the data go on
  // exactly where the checkpoint left them at this world size. A task whose epoch depends
  // on the world size (streamed shards) maps a position taken at another one here.
  struct ResumePoint {
    int64_t step = 0;
    bool exactAtThisWorldSize = false;
  };
  virtual ResumePoint resumeStep(const TrainState& state) { return {state.step, false}; }
  // Checkpoint metadata saying where in the data the last batch left off (with resumeStep).
  virtual std::map<std::string, std::string> dataPosition() const { return {}; }
};

// The registered tasks' factories (Task.cpp maps the task names to them).
std::unique_ptr<Task> makeClassificationTask(const TaskContext& context, const TaskData& data);
std::unique_ptr<Task> makeLanguageModelTask(const TaskContext& context, const TaskData& data);

// The task of the model `context.model` names; `data` may have null members.
std::unique_ptr<Task> makeTask(const TaskContext& context, const TaskData& data);

// Task-specific defaults of `config` for the flags the user did not set
// (`given` says which were): a gpt model trains on --dataset text with the
// peer's AdamW settings (../shared/bench/torch_gpt.py). Then checks that the
// dataset fits the model's task (UsageError otherwise).
void applyTaskDefaults(TrainConfig& config, const std::function<bool(const char* flag)>& given);

}  // namespace dtrain::runtime
