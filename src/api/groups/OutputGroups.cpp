// [checkpoint], [eval] and [logging]: what a run reads and writes besides training.
#include "api/Schema.h"
#include "api/groups/Conditions.h"
#include "core/Error.h"

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
