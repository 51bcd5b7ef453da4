// --dataset tokens: a language model on memory-mapped uint16 token shards (data/TokenShards.h,
// nanoGPT's .bin format). Batches keep the sampler contract of the byte-level task
// (data/TextBatcher.h): global step t's G window starts are drawn in order from an Rng seeded
// by (seed, t), rank r takes [r*B, (r+1)*B), so a batch is a pure function of (seed, t, rank)
// and resuming needs only the step. Without shuffle, consecutive windows from the start.
// Evaluation: --eval-batches fixed windows of the --test-data shards (seed 42).
#include <cmath>
#include <numbers>

#include "autograd/Ops.h"
#include "core/Error.h"
#include "core/Rng.h"
#include "data/ShardList.h"
#include "data/TokenShards.h"
#include "runtime/StreamingData.h"

namespace dtrain::runtime {
namespace {

std::unique_ptr<const data::TokenShards> openTokens(const std::string& patterns, const char* flag) {
  return std::make_unique<const data::TokenShards>(data::expandShardPattern(patterns, flag), flag);
}

class TokenTask final : public Task {
 public:
  TokenTask(const TaskContext& ctx, const TaskData&)
      : config_(ctx.config),
        rank_(ctx.rank),
        world_(ctx.worldSize),
        block_(ctx.model.blockSize),
        vocab_(static_cast<int>(ctx.model.vocab)),
        localBatch_(config_.batchSize * config_.accumulate),
        train_(openTokens(config_.trainData, "--train-data")),
        val_(ctx.reporter && !config_.testData.empty() ? openTokens(config_.testData, "--test-data")
                                                       : nullptr) {
    for (const data::TokenShards* t : {train_.get(), val_.get()}) {
      if (!t) continue;
      DTRAIN_CHECK_USAGE(t->vocabSize() <= vocab_, "--dataset tokens: meta.json gives a vocabulary "
                         "of ", t->vocabSize(), " tokens; --model ", config_.model, " has ", vocab_);
      DTRAIN_CHECK_USAGE(t->windowStarts(block_) >= 1, "--dataset tokens: ", t->tokens(),
                         " tokens hold no window of block ", block_, " + 1 in any one file");
    }
    steps_ = std::max<int64_t>(1, train_->tokens() / (globalBatch() * block_));
  }

  std::string describeData() const override {
    return detail::concat("tokens (", train_->tokens(), " in ", train_->files(), " shards, block ",
                          block_, ")");
  }
  int64_t stepsPerEpoch() const override { return steps_; }
  int64_t globalBatch() const override { return localBatch_ * world_; }
  void beginEpoch(int64_t epoch, int64_t step) override {
    next_ = step;
    end_ = (epoch + 1) * steps_;
  }
  bool nextBatch(data::Batch& b) override {
    if (next_ >= end_) return false;
    train_->fill(starts(next_++), block_, vocab_, b);
    return true;
  }
  autograd::Variable lossFromOutput(const autograd::Variable& output, const Tensor& y) override {
    return autograd::crossEntropy(output, y);
  }
  nlohmann::json evaluate(nn::Module& model) override {
    if (!val_) return nlohmann::json::object();
    autograd::NoGradGuard noGrad;
    const bool wasTraining = model.isTraining();
    model.eval();
    Rng rng(42);
    double sum = 0;
    data::Batch b;
    for (int64_t k = 0; k < config_.evalBatches; ++k) {
      std::vector<int64_t> s(static_cast<size_t>(config_.batchSize));
      for (auto& o : s) o = static_cast<int64_t>(rng.below(static_cast<uint64_t>(val_->windowStarts(block_))));
      val_->fill(s, block_, vocab_, b);
      sum += autograd::crossEntropy(model.forward(autograd::Variable(b.x)), b.y).item();
    }
    model.train(wasTraining);
    const double loss = sum / static_cast<double>(std::max<int64_t>(1, config_.evalBatches));
    return {{"val_loss", loss}, {"val_bits_per_token", loss / std::numbers::ln2}};
  }
  std::string describeEvaluation(const nlohmann::json& f) const override {
    if (!f.contains("val_loss")) return "no validation shards (--test-data not given)";
    return detail::concat("val loss ", f.at("val_loss").get<double>(), " (",
                          f.at("val_bits_per_token").get<double>(), " bits per token)");
  }
  nlohmann::json finalFields(double samplesPerS) const override {
    return {{"tokens_per_s", samplesPerS * static_cast<double>(block_)}, {"block_size", block_},
            {"shards", train_->files()}};
  }

 private:
  // This rank's window starts at global step `step`.
  std::vector<int64_t> starts(int64_t step) const {
    const auto windows = static_cast<uint64_t>(train_->windowStarts(block_));
    std::vector<int64_t> out(static_cast<size_t>(localBatch_));
    const int64_t first = rank_ * localBatch_;
    if (!config_.shuffle) {
      for (int64_t j = 0; j < localBatch_; ++j)
        out[j] = static_cast<int64_t>((static_cast<uint64_t>(step * globalBatch() + first + j) *
                                       static_cast<uint64_t>(block_)) % windows);
      return out;
    }
    Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step + 1)));
    for (int64_t j = 0; j < first; ++j) rng.next();
    for (auto& o : out) o = static_cast<int64_t>(rng.below(windows));
    return out;
  }

  const TrainConfig& config_;
  int rank_, world_;
  int64_t block_;
  int vocab_;
  int64_t localBatch_;
  std::unique_ptr<const data::TokenShards> train_, val_;
  int64_t steps_ = 1, next_ = 0, end_ = 0;
};

void loadNothing(const TrainConfig&, bool, TaskData&) {}  // each rank maps the files itself
nn::DataShape noShape(const TrainConfig&, const TaskData&) { return {}; }
std::unique_ptr<Task> makeTokenTask(const TaskContext& ctx, const TaskData& d) {
  return std::make_unique<TokenTask>(ctx, d);
}
void checkTokenFlags(const TrainConfig& c) {
  DTRAIN_CHECK_USAGE(!c.trainData.empty(), "--dataset tokens needs --train-data 'DIR/train-*.bin' "
                     "(uint16 token files; dtrain data pack --text FILE writes them)");
  DTRAIN_CHECK_USAGE(c.trainLabels.empty() && c.testLabels.empty(),
                     "--train-labels and --test-labels apply to --dataset npy");
}

}  // namespace

StreamingDataset tokensDataset() {
  return {nn::kLanguageModelTask, loadNothing, noShape, makeTokenTask, checkTokenFlags, false};
}

}  // namespace dtrain::runtime
