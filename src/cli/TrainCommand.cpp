#include "cli/TrainCommand.h"

#include <iostream>
#include <memory>

#include "nn/Models.h"
#include "optim/Factory.h"
#include "runtime/Trainer.h"

namespace dtrain::cli {

namespace {

struct TrainFlags {
  runtime::TrainConfig config;
  double momentum = -1;  // -1: the optimizer's default
  std::string progress = "auto";
  bool noShuffle = false;
};

void run(const TrainFlags& f) {
  runtime::TrainConfig c = f.config;
  if (f.momentum >= 0 || f.momentum != f.momentum) c.momentum = f.momentum;
  c.shuffle = !f.noShuffle;
  using P = runtime::TrainConfig::Progress;
  c.progress = f.progress == "bar" ? P::Bar : f.progress == "lines" ? P::Lines
               : f.progress == "off" ? P::Off : P::Auto;
  runtime::Trainer trainer(c, std::make_unique<parallel::SingleProcess>());
  runtime::TrainResult r = trainer.run();
  nlohmann::json out = r.toJson();
  out["model"] = c.model;
  out["dataset"] = c.dataset;
  out["batch_size"] = c.batchSize;
  out["threads"] = c.threads;
  out["workers"] = 1;
  out["strategy"] = "single";
  out["backend"] = "none";
  std::cout << out.dump() << std::endl;
}

}  // namespace

void addTrainCommand(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  runtime::TrainConfig& c = flags->config;
  CLI::App* sub = app.add_subcommand("train", "Train a model (prints one JSON line at the end)");
  // A repeated flag takes its last value, as most command-line tools do.
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("--model", c.model, "Built-in model")
      ->check(CLI::IsMember(nn::modelNames()))->capture_default_str();
  sub->add_option("--dataset", c.dataset, "fashion-mnist or synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "synthetic"}))->capture_default_str();
  sub->add_option("--data-dir", c.dataDir, "Directory of the IDX files")->capture_default_str();
  sub->add_option("--synthetic-size", c.syntheticSize, "Training samples of --dataset synthetic")
      ->capture_default_str();
  sub->add_option("--epochs", c.epochs, "Passes over the training set")->capture_default_str();
  sub->add_option("--max-steps", c.maxSteps,
                  "Stop when the global step count reaches N (0: no limit; counts resumed steps)")
      ->capture_default_str();
  sub->add_option("--batch-size", c.batchSize, "Samples per step (per worker)")->capture_default_str();
  sub->add_option("--optimizer", c.optimizer, "sgd, adam, adamw or adagrad")
      ->check(CLI::IsMember(optim::optimizerNames()))->capture_default_str();
  sub->add_option("--lr", c.lr, "Learning rate")->capture_default_str();
  sub->add_option("--momentum", flags->momentum, "SGD momentum (default 0.9)");
  sub->add_flag("--nesterov", c.nesterov, "Nesterov momentum (SGD)");
  sub->add_option("--weight-decay", c.weightDecay, "L2 penalty (AdamW: decoupled)")
      ->capture_default_str();
  sub->add_option("--schedule", c.schedule, "constant, step or cosine")->capture_default_str();
  sub->add_option("--step-size", c.stepSize, "Steps between decays of --schedule step (default: one epoch)");
  sub->add_option("--gamma", c.gamma, "Decay factor of --schedule step")->capture_default_str();
  sub->add_option("--warmup-steps", c.warmupSteps, "Linear learning-rate warmup steps")
      ->capture_default_str();
  sub->add_option("--seed", c.seed, "Seed of initialization and shuffling")->capture_default_str();
  sub->add_option("--threads", c.threads, "Intra-op threads (BLAS and kernels)")->capture_default_str();
  sub->add_flag("--no-shuffle", flags->noShuffle, "Take batches in file order");
  sub->add_option("--prefetch", c.prefetch, "Batches loaded ahead on a background thread (0: none)")
      ->capture_default_str();
  sub->add_option("--save", c.save, "Write a safetensors checkpoint at the end");
  sub->add_option("--load", c.load, "Start from a safetensors checkpoint (dtrain's or a PyTorch state_dict)");
  sub->add_option("--metrics", c.metrics, "Write one JSON object per logged step to FILE");
  sub->add_option("--eval-every", c.evalEvery, "Evaluate on the test set every N steps (0: at the end only)")
      ->capture_default_str();
  sub->add_option("--log-every", c.logEvery, "Steps between log lines and metrics records")
      ->capture_default_str();
  sub->add_option("--progress", flags->progress, "auto (bar on a terminal), bar, lines or off")
      ->check(CLI::IsMember({"auto", "bar", "lines", "off"}))->capture_default_str();
  sub->callback([flags] { run(*flags); });
}

}  // namespace dtrain::cli
