#pragma once
// The training loop shared by every strategy: data -> forward -> loss ->
// backward -> (strategy: gradients, update) -> metrics, with evaluation,
// checkpoints and progress. Strategies plug in through parallel::Strategy.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/Dataset.h"
#include "nn/Module.h"
#include "optim/Factory.h"
#include "optim/Optimizer.h"
#include "optim/LrSchedule.h"
#include "parallel/Strategy.h"
#include "parallel/compress/Compressor.h"
#include "parallel/ps/PsOptions.h"
#include "runtime/Checkpoint.h"
#include "runtime/Task.h"
#include "runtime/Timeline.h"
#include "runtime/TrainConfig.h"

namespace dtrain::runtime {

struct TrainResult {
  int64_t steps = 0;
  int64_t epochs = 0;     // epochs started
  int64_t epochsCompleted = 0;  // passes over the training set finished (resumed ones too)
  double seconds = 0;     // training loop only (no loading, no final evaluation)
  double samplesPerS = 0;
  // Of `seconds`, the time this rank's steps waited for their batch (the loader).
  double dataWaitSeconds = 0;
  double trainLoss = 0;   // mean over the last logging window
  // The rate the schedule starts from (warm-up ramps up to it): --lr, times
  // global batch / --batch-size under --scale-lr.
  double effectiveLr = 0;
  // The task's final evaluation and fields (test_accuracy and test_loss, or
  // val_loss, val_bpb, tokens_per_s ...), merged into the final JSON line.
  nlohmann::json evaluation = nlohmann::json::object();
  // Classification's figures, kept as fields for the callers that read them.
  double testAccuracy = 0;
  double testLoss = 0;
  // The strategy's figures (parallel::Strategy::stats) at the end of the run.
  std::map<std::string, double> strategyStats;
  nlohmann::json strategyReport = nlohmann::json::object();  // Strategy::report
  // Model states (LoRA trains a few): every parameter, those trained, and the
  // optimizer state's bytes on this rank.
  int64_t parameters = 0, trainableParameters = 0, optimizerStateBytes = 0;
  nlohmann::json memoryPerRank = nlohmann::json::array();    // parallel/MemoryGather.h
  bool stragglerWatched = false;  // runtime/StragglerWatch.h: the result line has "straggler"
  nlohmann::json straggler;       // {rank, host, excess_s, share_of_step} or null
  // The process's resident set when training ended, and its peak (all ranks
  // of a local run together; --offload is judged by these).
  int64_t rssBytes = 0, rssPeakBytes = 0;
  nlohmann::json toJson() const;
};

// Loads a classification dataset by --dataset (runtime/ClassificationData.cpp):
// "fashion-mnist" or "idx" from --data-dir, "npy" from --train-data ... , or
// "synthetic". The test set of npy without --test-data is null (hasTestSet).
std::shared_ptr<const data::Dataset> loadDataset(const TrainConfig& config, bool train);
// The test set of the training set `train` already loaded (its sample shape and
// classes are the test set's); null without one.
std::shared_ptr<const data::Dataset> loadTestDataset(const TrainConfig& config,
                                                     const data::Dataset& train);
// False for --dataset npy without --test-data: training reports no test figures.
bool hasTestSet(const TrainConfig& config);

// Accuracy and mean loss of `model` on `dataset`, in eval mode and no-grad.
std::pair<double, double> evaluate(nn::Module& model, const data::Dataset& dataset,
                                   int64_t batchSize);
// The same over the batches `next` yields until it returns false (streamed test sets).
std::pair<double, double> evaluateBatches(nn::Module& model,
                                          const std::function<bool(data::Batch&)>& next);

// The optimizer settings a config asks for (defaults: those of the PyTorch
// peer, e.g. SGD momentum 0.9). Parameter servers build theirs from it too.
optim::OptimizerOptions optimizerOptions(const TrainConfig& config);
// The directory --offload writes its files to (created; UsageError when it cannot be).
std::string offloadDirectory(const TrainConfig& config);

// The parameter-server settings a config asks for, for comm rank `rank`
// (servers first): the fault injection (--kill-server, --kill-worker) that
// names that rank, if any.
parallel::ps::PsOptions psOptions(const TrainConfig& config, int rank);
// The --compress flags (allreduce strategy).
parallel::compress::CompressOptions compressOptions(const TrainConfig& config);

class Trainer {
 public:
  // The model is built for `data`'s shape when it holds the training set, else
  // for the shape of the files the config names (runtime::dataShape).
  Trainer(TrainConfig config, std::unique_ptr<parallel::Strategy> strategy, TaskData data = {});
  // The strategy goes first: its hooks and forward wrappers are on the model's
  // modules, which it unhooks on the way out (ZeRO-3 did so after the model was
  // freed: a use after free that ThreadSanitizer reported).
  ~Trainer();
  // Datasets loaded by the caller (the ranks of the local backend share one
  // copy); without this call run() loads them itself.
  void setData(std::shared_ptr<const data::Dataset> train, std::shared_ptr<const data::Dataset> test);
  void setData(TaskData data) { data_ = std::move(data); }
  // Records spans of this rank into `timeline` (not owned; may be null).
  void setTimeline(Timeline* timeline) { timeline_ = timeline; }
  TrainResult run();

  nn::Module& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }

 private:
  // --checkpoint-every: checkpointState() is collective (every rank calls
  // this); the reporter writes D/step-<step>.safetensors and prunes old ones
  // (and says so when `say`; a stop on a signal says it in one line of its own).
  void saveCheckpointNow(TrainState state, int64_t step, int64_t perEpoch, int64_t globalBatch,
                         bool reporter, bool say = true);
  // Writes `state` as step `step`'s file of --checkpoint-dir, marks it the latest and
  // prunes the oldest beyond --keep-checkpoints; returns its path.
  std::string writeToCheckpointDir(const TrainState& state, int64_t step);
  // memory_per_rank: this rank's accounting domain, installed on the thread
  // that constructs and runs the trainer (core/Memory.h).
  memory::Domain* memoryDomain_ = memory::newDomain();
  memory::DomainScope memoryScope_{memoryDomain_};
  TrainConfig config_;
  std::unique_ptr<parallel::Strategy> strategy_;
  nn::ModelInfo modelInfo_;
  std::shared_ptr<nn::Module> model_;  // from the registry (nn/ModelRegistry.h)
  std::unique_ptr<optim::Optimizer> optimizer_;
  // --load, read once while preparing the model, until run() resumes from it.
  std::optional<SafetensorsFile> resumeFrom_;
  TaskData data_;  // null members: the task loads them
  Timeline* timeline_ = nullptr;
};

}  // namespace dtrain::runtime
