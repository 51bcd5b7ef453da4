// Classification (mlp, lenet): samples from a Dataset (runtime/ClassificationData.cpp), batches
// from the DistributedSampler through a prefetching Loader, cross-entropy over the classes,
// accuracy and loss on the whole test set.
#include <optional>

#include "autograd/Ops.h"
#include "core/Error.h"
#include "data/DistributedSampler.h"
#include "data/Loader.h"
#include "runtime/Task.h"
#include "runtime/Trainer.h"
#include "tensor/cpu/Reduce.h"

namespace dtrain::runtime {

using autograd::Variable;

std::pair<double, double> evaluate(nn::Module& model, const data::Dataset& dataset,
                                   int64_t batchSize) {
  int64_t begin = 0;
  return evaluateBatches(model, [&](data::Batch& b) {
    if (begin >= dataset.size()) return false;
    const int64_t end = std::min(dataset.size(), begin + batchSize);
    b = dataset.range(begin, end);
    begin = end;
    return true;
  });
}

std::pair<double, double> evaluateBatches(nn::Module& model,
                                          const std::function<bool(data::Batch&)>& next) {
  autograd::NoGradGuard noGrad;
  const bool wasTraining = model.isTraining();
  model.eval();
  int64_t correct = 0, seen = 0;
  double lossSum = 0;
  std::vector<int32_t> pred;
  for (data::Batch b; next(b);) {
    Variable logits = model.forward(Variable(b.x));
    const int64_t n = b.size(), classes = logits.shape()[1];
    seen += n;
    lossSum += autograd::crossEntropy(logits, b.y).item() * static_cast<double>(n);
    pred.resize(n);
    kernels::argmaxRows(logits.data().data<float>(), n, classes, pred.data());
    const int32_t* y = b.y.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) correct += pred[i] == y[i];
  }
  model.train(wasTraining);
  const double n = static_cast<double>(std::max<int64_t>(1, seen));
  return {static_cast<double>(correct) / n, lossSum / n};
}

namespace {

class ClassificationTask final : public Task {
 public:
  ClassificationTask(const TaskContext& ctx, const TaskData& data)
      : config_(ctx.config),
        rank_(ctx.rank),
        split_(splitValidation(ctx.config, data.train ? data.train : loadDataset(ctx.config, true))),
        train_(split_.train),
        test_(data.test ? data.test
                        : (ctx.reporter ? loadTestDataset(ctx.config, *train_) : nullptr)),
        // Gradient accumulation: each rank's loader yields K micro-batches of B
        // at once (local batch K*B), so the union over ranks and micro-steps is
        // the global batch N*K*B of the sampler contract.
        sampler_({train_->size(), config_.batchSize * config_.accumulate, ctx.worldSize,
                  config_.seed, config_.shuffle}) {
    data::checkAugmentable(augmentOptions(), train_->sampleShape());  // one line, before training
  }

  std::string describeData() const override {
    // The shape and classes the model was built for (runtime::dataShape).
    return detail::concat(config_.dataset, " (", train_->size(), " samples of ",
                          shapeStr(train_->sampleShape()), ", ", train_->numClasses(), " classes)");
  }
  int64_t stepsPerEpoch() const override { return sampler_.stepsPerEpoch(); }
  int64_t globalBatch() const override { return sampler_.globalBatch(); }
  void beginEpoch(int64_t epoch, int64_t step) override {
    loader_.reset();
    loader_.emplace(train_, sampler_, rank_, epoch,
                    data::LoaderOptions{step - epoch * stepsPerEpoch(), config_.prefetch,
                                        augmentOptions()});
  }
  bool nextBatch(data::Batch& b) override { return loader_->next(b); }
  void endEpoch() override { loader_.reset(); }
  Variable lossFromOutput(const Variable& output, const Tensor& y) override {
    return autograd::crossEntropy(output, y);
  }
  nlohmann::json evaluate(nn::Module& model) override {
    nlohmann::json out = nlohmann::json::object();
    if (split_.val) {
      auto [acc, loss] = runtime::evaluate(model, *split_.val, config_.evalBatch);
      out["val_accuracy"] = acc;
      out["val_loss"] = loss;
    }
    if (!hasTestSet(config_)) return out;  // --dataset npy without test files
    DTRAIN_CHECK(test_, "classification: this rank has no test set to evaluate on");
    auto [acc, loss] = runtime::evaluate(model, *test_, config_.evalBatch);
    out["test_accuracy"] = acc;
    out["test_loss"] = loss;
    return out;
  }
  std::string describeEvaluation(const nlohmann::json& f) const override {
    std::string val;
    if (f.contains("val_accuracy"))
      val = detail::concat("val accuracy ", f.at("val_accuracy").get<double>(), ", val loss ",
                           f.at("val_loss").get<double>());
    if (!f.contains("test_accuracy"))
      return val.empty() ? "no test set (--test-data and --test-labels not given)" : val;
    return detail::concat(val, val.empty() ? "" : ", ", "test accuracy ",
                          f.at("test_accuracy").get<double>(), ", test loss ",
                          f.at("test_loss").get<double>());
  }

 private:
  data::AugmentOptions augmentOptions() const {
    data::AugmentOptions o = data::parseAugment(config_.augment);
    o.seed = config_.seed;
    return o;
  }

  const TrainConfig& config_;
  int rank_;
  ValidationSplit split_;  // --val-fraction: the training part and the held-out part
  std::shared_ptr<const data::Dataset> train_, test_;
  data::DistributedSampler sampler_;
  std::optional<data::Loader> loader_;
};

}  // namespace

std::unique_ptr<Task> makeClassificationTask(const TaskContext& ctx, const TaskData& data) {
  return std::make_unique<ClassificationTask>(ctx, data);
}

}  // namespace dtrain::runtime
