// [checkpoint], [eval] and [logging]: what a run reads and writes besides training.
#include "api/Schema.h"
#include "api/groups/Conditions.h"
#include "core/Error.h"
#include "runtime/EarlyStopping.h"
#include "runtime/StreamingData.h"

namespace dtrain::api {

using runtime::TrainConfig;

void addCheckpointOptions(Schema& s) {
  s.addGroup("checkpoint", "Checkpoints");
  s.add("checkpoint", "save", "--save", "Write a safetensors checkpoint at the end")
      .train(&TrainConfig::save);
  s.add("checkpoint", "load", "--load",
        "Start from a safetensors checkpoint (dtrain's or a PyTorch state_dict)")
      .train(&TrainConfig::load);
  s.add("checkpoint", "every", "--checkpoint-every",
        "Write a checkpoint every N steps into --checkpoint-dir (0: off)")
      .train(&TrainConfig::checkpointEvery).range(0);
  s.add("checkpoint", "dir", "--checkpoint-dir",
        "Directory of the periodic checkpoints (step-<N>.safetensors; latest.safetensors links "
        "the newest), where a run saves its last step too, at the end or stopped by Ctrl-C or "
        "SIGTERM")
      .train(&TrainConfig::checkpointDir);
  s.add("checkpoint", "keep", "--keep-checkpoints", "Periodic checkpoints kept (the newest)")
      .train(&TrainConfig::keepCheckpoints).range(1)
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.checkpointEvery > 0, "applies with --checkpoint-every N");
      });
  s.add("checkpoint", "resume", "--resume",
        "auto (the newest valid checkpoint in --checkpoint-dir; none: start fresh) or a "
        "checkpoint file: go on from its step, data position and optimizer state")
      .train(&TrainConfig::resume);
}

void addEvalOptions(Schema& s) {
  s.addGroup("eval", "Evaluation");
  s.add("eval", "every", "--eval-every", "Evaluate on the test set every N steps (0: at the end only)")
      .train(&TrainConfig::evalEvery).range(0);
  s.add("eval", "deferred", "--eval-deferred",
        "With --eval-every: copy the parameters then and evaluate the copies after training "
        "(time-to-accuracy runs: evaluating never pauses one worker while others train)")
      .train(&TrainConfig::evalDeferred)
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.evalEvery > 0, "applies with --eval-every N");
      });
  s.add("eval", "val_fraction", "--val-fraction",
        "Hold out this fraction of the training set (drawn by --seed) as a validation split, "
        "evaluated where the test set is: val_loss and val_accuracy")
      .train(&TrainConfig::valFraction).above(0, 0.9)
      .when([](const RunConfig& rc) {
        if (isLanguageModel(rc))
          return std::string("does not apply to the gpt-* models: they hold out validation "
                             "windows of their own (val_loss; --eval-batches)");
        if (runtime::streamingDataset(rc.train.dataset))
          return "does not apply to --dataset " + rc.train.dataset +
                 ": streamed samples cannot be split; give validation shards as --test-data";
        return std::string();
      });
  s.add("eval", "early_stop_patience", "--early-stop-patience",
        "Stop once this many evaluations (--eval-every) in a row have not improved "
        "--early-stop-metric (0: off); the result line says stopped_early and best_step")
      .train(&TrainConfig::earlyStopPatience).range(0)
      .when([](const RunConfig& rc) {
        if (rc.train.evalDeferred) return std::string("does not combine with --eval-deferred");
        return unlessThen(rc.train.evalEvery > 0, "needs --eval-every N (the evaluations it compares)");
      });
  s.add("eval", "early_stop_metric", "--early-stop-metric",
        "What early stopping watches: val_loss (default), val_accuracy, val_bpb (gpt-*), "
        "test_loss or test_accuracy")
      .train(&TrainConfig::earlyStopMetric).oneOf(runtime::earlyStopMetricNames)
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.earlyStopPatience > 0, "applies with --early-stop-patience P");
      });
  s.add("eval", "batch", "--eval-batch", "Samples per evaluation batch (classifiers)")
      .train(&TrainConfig::evalBatch).range(1)
      .when([](const RunConfig& rc) {
        return unlessThen(!isLanguageModel(rc), "applies to classifiers (gpt-*: --eval-batches)");
      });
  s.add("eval", "batches", "--eval-batches",
        "gpt: fixed validation batches (of --batch-size windows) per evaluation")
      .train(&TrainConfig::evalBatches).range(1)
      .when([](const RunConfig& rc) {
        return unlessThen(isLanguageModel(rc), "applies to the gpt-* models");
      });
}

void addLoggingOptions(Schema& s) {
  s.addGroup("logging", "Logging and metrics");
  s.add("logging", "metrics", "--metrics", "Write one JSON object per logged step to FILE")
      .train(&TrainConfig::metrics);
  s.add("logging", "timeline", "--timeline", "Write a Chrome trace-event JSON timeline to FILE")
      .train(&TrainConfig::timeline);
  s.add("logging", "tensorboard", "--tensorboard",
        "Write the metrics' scalars as TensorBoard event files into DIR (tensorboard --logdir DIR)")
      .train(&TrainConfig::tensorboard);
  s.add("logging", "machine", "--machine",
        "Machine file (dtrain calibrate's): the result line adds dtrain simulate's predicted_step_s "
        "and predicted_samples_per_s for this run")
      .train(&TrainConfig::machine);
  s.add("logging", "log_every", "--log-every", "Steps between log lines and metrics records")
      .train(&TrainConfig::logEvery).range(1);
  Option& progress = s.add("logging", "progress", "--progress",
                           "auto (bar on a terminal), bar, lines or off");
  progress.kind = Kind::String;
  progress.oneOf({"auto", "bar", "lines", "off"});
  using P = TrainConfig::Progress;
  progress.set = [](RunConfig& rc, const Value& v) {
    const auto& t = std::get<std::string>(v);
    rc.train.progress = t == "bar" ? P::Bar : t == "lines" ? P::Lines : t == "off" ? P::Off : P::Auto;
  };
  progress.get = [](const RunConfig& rc) -> std::optional<Value> {
    const P p = rc.train.progress;
    return Value(std::string(p == P::Bar ? "bar" : p == P::Lines ? "lines" : p == P::Off ? "off" : "auto"));
  };
}

}  // namespace dtrain::api
