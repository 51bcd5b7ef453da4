#include "federated/LocalTrainer.h"

#include <algorithm>
#include <cmath>

#include "core/Error.h"
#include "core/Rng.h"
#include "optim/Factory.h"
#include "runtime/Trainer.h"

namespace dtrain::federated {

int64_t flatSize(const nn::Module& model) { return model.parameterCount(); }

void readFlat(const nn::Module& model, std::span<float> out) {
  size_t at = 0;
  for (const auto& [name, p] : model.namedParameters()) {
    const Tensor t = p.data().contiguous();
    std::copy_n(t.data<float>(), t.numel(), out.data() + at);
    at += static_cast<size_t>(t.numel());
  }
  DTRAIN_CHECK(at == out.size(), "readFlat: ", out.size(), " floats for ", at, " parameters");
}

void writeFlat(nn::Module& model, std::span<const float> in) {
  size_t at = 0;
  for (auto& [name, p] : model.namedParameters()) {
    Tensor& t = p.data();
    DTRAIN_CHECK(t.isContiguous(), "writeFlat: parameter ", name, " is not contiguous");
    std::copy_n(in.data() + at, t.numel(), t.data<float>());
    at += static_cast<size_t>(t.numel());
  }
  DTRAIN_CHECK(at == in.size(), "writeFlat: ", in.size(), " floats for ", at, " parameters");
}

namespace {
// Clients restart their optimizer every round: SGD without momentum unless asked
// (the paper's ClientUpdate is plain SGD; the trainer's default momentum is 0.9).
optim::OptimizerOptions clientOptimizerOptions(const runtime::TrainConfig& c) {
  runtime::TrainConfig copy = c;
  if ((c.optimizer == "sgd" || c.optimizer == "lars") && !c.momentum) copy.momentum = 0.0;
  return runtime::optimizerOptions(copy);
}
}  // namespace

LocalTrainer::LocalTrainer(const runtime::TrainConfig& config, const FederatedOptions& options,
                           runtime::Task& task, std::shared_ptr<const data::Dataset> train)
    : options_(options), task_(task), train_(std::move(train)) {
  // The server's model (FederatedRunner): built for the training set's shape.
  runtime::TaskData data;
  data.train = train_;
  model_ = nn::buildModel(config.model, runtime::modelOverrides(config), config.seed,
                          runtime::dataShape(config, data));
  optimizer_ = optim::makeOptimizer(config.optimizer, model_->namedParameters(),
                                    clientOptimizerOptions(config));
}

void LocalTrainer::train(std::span<const float> global, const ClientJob& job, ClientResult& out) {
  writeFlat(*model_, global);
  optimizer_->resetState();
  model_->train();
  std::vector<int64_t> order = *job.indices;
  const auto n = static_cast<int64_t>(order.size());
  const int64_t batch = options_.localBatch > 0 ? std::min(options_.localBatch, n) : n;
  const int classes = train_->numClasses();
  Rng rng(job.seed);
  double lossSum = 0;
  int64_t steps = 0;
  auto params = model_->namedParameters();
  for (int64_t epoch = 0; epoch < options_.localEpochs; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    for (int64_t begin = 0; begin < n; begin += batch) {
      const int64_t end = std::min(n, begin + batch);
      train_->fill(std::span<const int64_t>(order.data() + begin, end - begin), batch_);
      if (job.flipLabels) {
        int32_t* y = batch_.y.data<int32_t>();
        for (int64_t k = 0; k < batch_.size(); ++k) y[k] = classes - 1 - y[k];
      }
      model_->zeroGrad();
      autograd::Variable loss = task_.loss(*model_, batch_.x, batch_.y);
      const float l = loss.item();
      DTRAIN_CHECK(std::isfinite(l), "a client's local loss became ", l,
                   " (the global model may have diverged: an attack the --aggregator let through, "
                   "or too high an --lr, now ", optimizer_->lr(), ")");
      loss.backward();
      if (options_.proxMu > 0) {
        // FedProx: the gradient of mu/2 ||w - w_global||^2 is mu (w - w_global).
        const float mu = static_cast<float>(options_.proxMu);
        size_t at = 0;
        for (auto& [name, p] : params) {
          const float* w = p.data().data<float>();
          float* g = p.grad().data<float>();
          for (int64_t k = 0; k < p.numel(); ++k) g[k] += mu * (w[k] - global[at + k]);
          at += static_cast<size_t>(p.numel());
        }
      }
      optimizer_->step();
      lossSum += l;
      ++steps;
    }
  }
  out.delta.resize(global.size());
  readFlat(*model_, out.delta);
  for (size_t k = 0; k < global.size(); ++k) out.delta[k] -= global[k];
  out.meanLoss = steps ? lossSum / steps : 0;
  out.steps = steps;
}

}  // namespace dtrain::federated
