#pragma once
// ZeRO (Rajbhandari et al. 2020) stages 1 and 2 on synchronous data
// parallelism (--strategy allreduce --zero 1|2).
//
// Sharding is by flat ranges, not by whole parameters: the gradients live in
// fusion buckets (FusionBuckets.h), each padded to a multiple of N floats, and
// rank r owns the r-th of the N equal slices of every bucket. Whole-parameter
// sharding would leave ranks unbalanced (one embedding matrix can be most of a
// model), while equal slices make each rank's optimizer state 8P/N to within
// the padding, and the collectives are plain reduce-scatter and allgather over
// the buckets DataParallel already builds. The optimizer state stays
// addressable per parameter: each rank's shard optimizer holds one 1-D "piece"
// per (parameter, slice) intersection, named "<param>@<offset>", and a
// checkpoint gathers the pieces back into full "<param>.<slot>" tensors.
//
//  - Parameters live in padded flat buffers, one per bucket (each parameter's
//    data a view into it), so that one in-place allgather per bucket brings
//    every rank's updated slice to every rank after the update.
//  - Stage 1: the full gradient buckets are kept (as in DataParallel); each
//    bucket is reduce-scattered (launched from the gradient-ready hooks, in
//    bucket order) and the averaged slice copied into its own range.
//  - Stage 2: a bucket exists only while backward fills it: the first two are
//    allocated at the start of a step, bucket b+1 and b+2 when backward
//    reaches bucket b, and each is freed as soon as its reduce-scatter finished
//    (checked at every launch, during backward); only the owned slice (a
//    persistent 4P/N buffer) remains. A gradient that arrives before its
//    bucket exists lands in a tensor of its own and is copied in.
//  - Elementwise optimizers only (sgd, adam, adamw, adagrad): LARS needs whole
//    tensors' norms.
#include <memory>
#include <vector>

#include "comm/Communicator.h"
#include "optim/Factory.h"
#include "parallel/Strategy.h"
#include "parallel/allreduce/FusionBuckets.h"

namespace dtrain::parallel::zero {

struct ZeroOptions {
  int stage = 1;  // 1 or 2
  double fusionMb = 0.25;
  std::string optimizer = "adam";  // the shard optimizer's kind and settings
  optim::OptimizerOptions optimizerOptions;
};

// Throws UsageError on a stage or optimizer ZeRO does not support.
void validate(const ZeroOptions& options);

class ZeroDataParallel final : public Strategy {
 public:
  ZeroDataParallel(comm::Communicator& comm, ZeroOptions options);
  ~ZeroDataParallel() override;

  std::string name() const override { return "allreduce"; }
  int rank() const override { return comm_.rank(); }
  int worldSize() const override { return comm_.size(); }
  bool ownsProcess() const override { return std::string(comm_.backend()) != "local"; }

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override;
  void zeroGradients(nn::Module& model) override;
  void beginMicroStep(int index, int count) override { syncing_ = index == count - 1; }
  void finishGradients() override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  double gradNormSquared(nn::Module& model) override;
  void scaleGradients(nn::Module& model, float coef) override;
  double reduceMetric(double localValue) override;
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  std::map<std::string, double> stats() const override;
  // Gathers every rank's optimizer shard into full per-parameter state; the
  // reporter writes it into the trainer's optimizer in syncModel (--save).
  std::map<std::string, Tensor> checkpointState() override;
  void syncModel(nn::Module& model, optim::Optimizer* optimizer) override;

  // This rank's shard optimizer (its pieces and their state).
  optim::Optimizer& shardOptimizer() { return *shard_; }

 private:
  struct Piece {
    size_t bucket;
    autograd::Variable param;  // the full parameter
    std::string name;          // the full parameter's name
    int64_t paramOffset;       // first element of the piece in the parameter
    int64_t bucketOffset;      // ... and in its bucket
    int64_t length;
  };
  // From the parameters: stage 2 frees the gradient buckets between steps.
  int64_t shardSize(size_t bucket) const { return paramFlat_[bucket].numel() / comm_.size(); }
  void allocateGradBuckets();
  void allocateGradBucket(size_t bucket);
  // Stage 2: frees the full gradient buckets whose reduce-scatter finished.
  void freeReducedBuckets();
  void onGradReady(size_t bucket);
  void launchInOrder(bool all);
  void buildShardOptimizer(const optim::Optimizer& full);

  comm::Communicator& comm_;
  ZeroOptions opts_;
  std::vector<FusionBucket> buckets_;      // gradients (stage 2: only during a step)
  std::vector<Tensor> paramFlat_;          // per bucket, padded like it
  std::vector<Tensor> gradShard_;          // per bucket: the owned, averaged slice
  std::vector<std::vector<std::string>> bucketNames_;  // per bucket, its parameters' names
  std::vector<Piece> pieces_;              // the shard optimizer's parameters, in order
  std::unique_ptr<optim::Optimizer> shard_;
  std::vector<comm::WorkPtr> work_;        // per bucket, this step's reduce-scatter
  std::vector<size_t> ready_;
  size_t nextLaunch_ = 0;
  bool syncing_ = true;
  std::map<std::string, Tensor> gathered_;  // checkpointState, on the reporter

  int64_t steps_ = 0;
  uint64_t sentAtStepStart_ = 0, stepSent_ = 0;
};

}  // namespace dtrain::parallel::zero
