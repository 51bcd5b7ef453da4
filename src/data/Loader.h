#pragma once
// Iterates one epoch of one rank's local batches, in the sampler's order, optionally
// prefetching on one background thread:
//
//   Loader loader(dataset, sampler, rank, epoch);          // or {.startStep = s} to resume
//   for (Batch b; loader.next(b);) train(b.x, b.y);
//
// With prefetch depth d > 0 a producer thread gathers up to d batches ahead into a
// bounded queue; with d = 0 next() gathers synchronously. The order is the same either
// way. An exception thrown while producing a batch is rethrown by the next() that would
// have returned it. Destroying a loader mid-epoch stops and joins the producer.
//
// Buffers are recycled: a batch's tensors are reused once the consumer has dropped every
// reference to them (e.g. the autograd graph of the step that used them is gone);
// otherwise fresh ones are allocated, so a batch still in use is never overwritten.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/Augment.h"
#include "data/Dataset.h"
#include "data/DistributedSampler.h"

namespace dtrain::data {

struct LoaderOptions {
  int64_t startStep = 0;  // first step to produce (resume mid-epoch)
  int prefetch = 2;       // queue depth; 0 = synchronous
  // Applied to each batch as it is gathered (on the producer thread), seeded by
  // the sample's place in the step's global batch (data/Augment.h).
  AugmentOptions augment{};
};

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, const DistributedSampler& sampler, int rank,
         int64_t epoch, LoaderOptions options = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Stores the next batch in `out` and returns true, or returns false at the end of the
  // epoch. Rethrows the producer's exception, if any.
  bool next(Batch& out);

  int64_t epoch() const { return epoch_; }
  // Step of the batch the next call to next() returns.
  int64_t step() const { return consumed_; }
  int64_t stepsPerEpoch() const { return sampler_.stepsPerEpoch(); }

 private:
  void produce(int64_t step, Batch& out);
  void producerLoop();
  Batch& recycledSlot();

  std::shared_ptr<const Dataset> dataset_;
  DistributedSampler sampler_;
  int rank_;
  int64_t epoch_;
  int depth_;
  AugmentOptions augment_;
  std::vector<int64_t> perm_;
  int64_t startStep_;
  int64_t consumed_;  // consumer's next step (consumer thread only)

  // Producer-owned buffers, reused round robin once the consumer has let go of them.
  std::vector<Batch> slots_;
  size_t nextSlot_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool done_ = false;  // producer finished (end of epoch, error or stop)
  bool stop_ = false;  // consumer asks the producer to quit
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace dtrain::data
