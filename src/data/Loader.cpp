#include "data/Loader.h"

namespace dtrain::data {

Loader::Loader(std::shared_ptr<const Dataset> dataset, const DistributedSampler& sampler, int rank,
               int64_t epoch, LoaderOptions options)
    : dataset_(std::move(dataset)),
      sampler_(sampler),
      rank_(rank),
      epoch_(epoch),
      depth_(options.prefetch),
      augment_(options.augment),
      startStep_(options.startStep),
      consumed_(options.startStep) {
  DTRAIN_CHECK(dataset_ != nullptr, "Loader: null dataset");
  DTRAIN_CHECK(dataset_->size() == sampler_.config().datasetSize, "Loader: dataset has ",
               dataset_->size(), " samples but the sampler was built for ",
               sampler_.config().datasetSize);
  DTRAIN_CHECK(rank_ >= 0 && rank_ < sampler_.config().worldSize, "Loader: rank ", rank_,
               " out of range [0, ", sampler_.config().worldSize, ")");
  DTRAIN_CHECK(depth_ >= 0, "Loader: prefetch depth must be >= 0, got ", depth_);
  DTRAIN_CHECK(consumed_ >= 0 && consumed_ <= sampler_.stepsPerEpoch(), "Loader: start step ",
               consumed_, " out of range [0, ", sampler_.stepsPerEpoch(), "]");
  checkAugmentable(augment_, dataset_->sampleShape());
  perm_ = sampler_.permutation(epoch_);
  // One slot being filled, `depth_` queued, one held by the consumer, one it just released.
  slots_.resize(static_cast<size_t>(depth_) + 3);
  if (depth_ > 0) thread_ = std::thread([this] { producerLoop(); });
}

Loader::~Loader() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Batch& Loader::recycledSlot() {
  Batch& slot = slots_[nextSlot_];
  nextSlot_ = (nextSlot_ + 1) % slots_.size();
  return slot;
}

void Loader::produce(int64_t step, Batch& out) {
  dataset_->fill(sampler_.slice(perm_, step, rank_), out);
  // Rank r's slice starts at r * B in the step's global batch (the sampler contract).
  if (augment_.any())
    augmentSamples(augment_, dataset_->sampleShape(), out.x.data<float>(), out.size(), epoch_, step,
                   rank_ * sampler_.config().localBatch);
}

void Loader::producerLoop() {
  try {
    for (int64_t step = startStep_; step < sampler_.stepsPerEpoch(); ++step) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < depth_; });
        if (stop_) break;
      }
      // Gathers outside the lock; fill() only reuses the slot's buffers if the queue and
      // the consumer hold no reference to them.
      Batch& slot = recycledSlot();
      produce(step, slot);
      {
        std::lock_guard lock(mu_);
        queue_.push_back(slot);  // shares the buffers with the slot
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

bool Loader::next(Batch& out) {
  if (depth_ == 0) {
    if (consumed_ >= sampler_.stepsPerEpoch()) return false;
    produce(consumed_, out);  // reuses out's buffers when the caller holds no other reference
    ++consumed_;
    return true;
  }
  Batch b;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    b = std::move(queue_.front());
    queue_.pop_front();
  }
  cv_.notify_all();
  out = std::move(b);  // drops the caller's previous batch, so its slot can be recycled
  ++consumed_;
  return true;
}

}  // namespace dtrain::data
