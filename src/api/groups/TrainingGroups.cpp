// [training] (the step loop and the engine) and [optimizer] (update rule and schedule).
#include "api/Schema.h"
#include "api/groups/Conditions.h"
#include "autograd/Precision.h"
#include "optim/Factory.h"

namespace dtrain::api {

using runtime::TrainConfig;

void addTrainingOptions(Schema& s) {
  s.addGroup("training", "Training");
  s.add("training", "epochs", "--epochs",
        "Passes over the training set (default 1; unbounded under --max-steps alone)")
      .train(&TrainConfig::epochs).range(1);
  s.add("training", "max_steps", "--max-steps",
        "Train N steps in all, crossing epochs as needed (0: no limit; counts resumed "
        "steps); with --epochs, whichever ends first")
      .train(&TrainConfig::maxSteps).range(0);
  s.add("training", "batch_size", "--batch-size", "Samples per step (per worker)")
      .train(&TrainConfig::batchSize).range(1).result("batch_size");
  s.add("training", "accumulate", "--accumulate",
        "Micro-steps of --batch-size per optimizer step (gradient accumulation)")
      .train(&TrainConfig::accumulate).range(1).result("accumulate");
  s.add("training", "seed", "--seed", "Seed of initialization and shuffling")
      .train(&TrainConfig::seed).range(0);
  s.add("training", "threads", "--threads",
        "Intra-op threads per rank (BLAS and kernels): auto (OMP_NUM_THREADS when set, else this "
        "machine's cores shared by the ranks running on it) or N")
      .train(&TrainConfig::threads).range(0, 1024).zeroMeans("auto").result("threads");
  s.add("training", "precision", "--precision",
        "Linear layers' matrix products: fp32, or bf16 (bf16 operands, fp32 accumulation; "
        "parameters, gradients and optimizer state stay fp32)")
      .train(&TrainConfig::precision).result("precision")
      .set = [](RunConfig& rc, const Value& v) {
        const auto& name = std::get<std::string>(v);
        autograd::parsePrecision(name);  // names the known ones (and says fp16 needs a GPU)
        rc.train.precision = name;
      };
  s.add("training", "gemm", "--gemm",
        "Matrix products on: auto (oneDNN or OpenBLAS, whichever is faster for the CPU and "
        "shape), onednn, openblas")
      .train(&TrainConfig::gemm).oneOf({"auto", "onednn", "openblas"}).result("gemm");
  s.add("training", "clip_grad_norm", "--clip-grad-norm",
        "Clip the global gradient norm to X (0: off; gpt default 1.0)")
      .train(&TrainConfig::clipGradNorm).range(0);
}

void addOptimizerOptions(Schema& s) {
  s.addGroup("optimizer", "Optimizer and learning-rate schedule");
  s.add("optimizer", "name", "--optimizer", "sgd, adam, adamw, adagrad, lars, lamb or lbfgs (one L-BFGS iteration per step; try --lr 1)")
      .train(&TrainConfig::optimizer)
      .oneOf([] { return optim::optimizerNames(); });
  s.add("optimizer", "lr", "--lr", "Learning rate").train(&TrainConfig::lr).above(0);
  auto sgdLike = [](const RunConfig& rc) {
    const auto& o = rc.train.optimizer;
    return unlessThen(o == "sgd" || o == "lars", "applies to --optimizer sgd and lars");
  };
  s.add("optimizer", "momentum", "--momentum", "SGD momentum (default 0.9)")
      .train(&TrainConfig::momentum).range(0).when(sgdLike);
  s.add("optimizer", "nesterov", "--nesterov", "Nesterov momentum (SGD)")
      .train(&TrainConfig::nesterov).when(sgdLike);
  s.add("optimizer", "lbfgs_history", "--lbfgs-history",
        "lbfgs: curvature pairs (s, y) kept for the two-loop recursion (m)")
      .train(&TrainConfig::lbfgsHistory).range(1).when([](const RunConfig& rc) {
        return unlessThen(rc.train.optimizer == "lbfgs", "applies to --optimizer lbfgs");
      });
  s.add("optimizer", "weight_decay", "--weight-decay",
        "L2 penalty (AdamW: decoupled; gpt default 0.1)")
      .train(&TrainConfig::weightDecay).range(0);
  s.add("optimizer", "decay_2d_only", "--decay-2d-only",
        "Weight decay only for parameters with >= 2 dims, not biases or norm weights "
        "(nanoGPT's groups; default on for gpt models)")
      .train(&TrainConfig::decay2dOnly).negated("--no-decay-2d-only");
  Option& betas = s.add("optimizer", "adam_betas", "--adam-betas",
                        "adam, adamw, lamb: B1,B2 (default 0.9,0.999; gpt 0.9,0.95)");
  betas.kind = Kind::FloatList;
  betas.range(0, 1);
  betas.set = [](RunConfig& rc, const Value& v) {
    const auto& b = std::get<std::vector<double>>(v);
    DTRAIN_CHECK_USAGE(b.size() == 2, "expects two numbers B1,B2 (e.g. 0.9,0.95; got ", b.size(),
                       ")");
    rc.train.beta1 = b[0];
    rc.train.beta2 = b[1];
  };
  betas.get = [](const RunConfig& rc) -> std::optional<Value> {
    if (!rc.train.beta1 || !rc.train.beta2) return std::nullopt;
    return Value(std::vector<double>{*rc.train.beta1, *rc.train.beta2});
  };
  betas.when([](const RunConfig& rc) {
    const auto& o = rc.train.optimizer;
    return unlessThen(o == "adam" || o == "adamw" || o == "lamb",
                      "applies to --optimizer adam, adamw and lamb");
  });
  s.add("optimizer", "schedule", "--schedule", "Learning-rate schedule: constant, step or cosine")
      .train(&TrainConfig::schedule).oneOf({"constant", "step", "cosine"});
  s.add("optimizer", "warmup_steps", "--warmup-steps", "Linear learning-rate warmup steps")
      .train(&TrainConfig::warmupSteps).range(0);
  auto stepSchedule = [](const RunConfig& rc) {
    return unlessThen(rc.train.schedule == "step", "applies to --schedule step");
  };
  s.add("optimizer", "step_size", "--step-size",
        "Steps between decays of --schedule step (0: one epoch)")
      .train(&TrainConfig::stepSize).range(0).when(stepSchedule);
  s.add("optimizer", "gamma", "--gamma", "Decay factor of --schedule step")
      .train(&TrainConfig::gamma).range(0).when(stepSchedule);
  s.add("optimizer", "scale_lr", "--scale-lr", "Linear scaling rule: multiply --lr by global batch / --batch-size "
        "(data-parallel workers x --accumulate)")
      .train(&TrainConfig::scaleLr);
}

}  // namespace dtrain::api
