// Language modeling (gpt-*): windows of a byte-level corpus from TextBatcher
// (a pure function of the global step, so resuming needs only the step),
// cross-entropy over the B*T next-byte predictions, and val_loss / val_bpb on
// fixed validation windows.
#include <cmath>
#include <numbers>

#include "autograd/Ops.h"
#include "core/Error.h"
#include "data/KjvCorpus.h"
#include "data/TextBatcher.h"
#include "runtime/Task.h"

namespace dtrain::runtime {

using autograd::Variable;

namespace {

class LanguageModelTask final : public Task {
 public:
  LanguageModelTask(const TaskContext& ctx, const TaskData& data)
      : config_(ctx.config),
        rank_(ctx.rank),
        reporter_(ctx.reporter),
        block_(ctx.model.blockSize),
        corpus_(data.text ? data.text : data::loadTextCorpus(ctx.config.textFile)),
        // Gradient accumulation: K micro-batches of B per rank, as classification.
        batcher_(corpus_, {config_.batchSize * config_.accumulate, ctx.worldSize, block_,
                           config_.seed, config_.shuffle}) {
    DTRAIN_CHECK_USAGE(ctx.model.vocab == data::kTextVocab, "--model ", config_.model,
                       " has a vocabulary of ", ctx.model.vocab, " tokens; byte-level text needs ",
                       data::kTextVocab);
  }

  std::string describeData() const override {
    return detail::concat(corpus_->name(), " (", corpus_->size(), " bytes, block ", block_, ")");
  }
  int64_t stepsPerEpoch() const override { return batcher_.stepsPerEpoch(); }
  int64_t globalBatch() const override { return batcher_.globalBatch(); }
  void beginEpoch(int64_t epoch, int64_t step) override {
    next_ = step;
    end_ = (epoch + 1) * stepsPerEpoch();
  }
  bool nextBatch(data::Batch& b) override {
    if (next_ >= end_) return false;
    batcher_.fill(next_++, rank_, b);
    return true;
  }
  // logits [B, T, V] against targets [B, T]: the mean over the B*T predictions.
  Variable lossFromOutput(const Variable& output, const Tensor& y) override {
    return autograd::crossEntropy(output, y);
  }
  nlohmann::json evaluate(nn::Module& model) override {
    DTRAIN_CHECK(reporter_, "language model: only the reporting rank evaluates");
    if (eval_.empty())
      eval_ = data::textEvalBatches(*corpus_, {config_.batchSize, block_, config_.evalBatches, 42});
    autograd::NoGradGuard noGrad;
    const bool wasTraining = model.isTraining();
    model.eval();
    double sum = 0;
    for (const data::Batch& b : eval_) sum += autograd::crossEntropy(model.forward(Variable(b.x)), b.y).item();
    model.train(wasTraining);
    const double loss = sum / static_cast<double>(eval_.size());
    return {{"val_loss", loss}, {"val_bpb", loss / std::numbers::ln2}};
  }
  std::string describeEvaluation(const nlohmann::json& f) const override {
    return detail::concat("val loss ", f.at("val_loss").get<double>(), " (",
                          f.at("val_bpb").get<double>(), " bits per byte)");
  }
  nlohmann::json finalFields(double samplesPerS) const override {
    return {{"tokens_per_s", samplesPerS * static_cast<double>(block_)},
            {"block_size", block_},
            {"corpus", corpus_->name()}};
  }

 private:
  const TrainConfig& config_;
  int rank_;
  bool reporter_;
  int64_t block_;
  std::shared_ptr<const data::TextCorpus> corpus_;
  data::TextBatcher batcher_;
  int64_t next_ = 0, end_ = 0;
  std::vector<data::Batch> eval_;  // built on first use: only the reporter evaluates
};

}  // namespace

std::unique_ptr<Task> makeLanguageModelTask(const TaskContext& ctx, const TaskData& data) {
  return std::make_unique<LanguageModelTask>(ctx, data);
}

}  // namespace dtrain::runtime
