#pragma once
// ZeRO (Rajbhandari et al. 2020) stages 1, 2 and 3 on synchronous data
// parallelism (--strategy allreduce --zero 1|2|3).
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
//  - Stage 3 (ZeroStage3.cpp; FSDP's design): the parameters are sharded too.
//    A bucket is a unit of the model instead of a size: each block
//    (nn::sequentialBlocks: a transformer block, an mlp layer), and a root
//    unit with what no block holds (gpt's embeddings, tied lm_head and ln_f).
//    Between uses, a unit's flat buffer has no memory (Storage::release; the
//    views autograd saved stay valid) and the rank keeps its owned slice (a
//    persistent 4P/N buffer the shard optimizer updates in place). A block's
//    forward wrapper allgathers its parameters (prefetching the next block's),
//    runs it and releases them; an identity node on its output gathers them
//    again when backward reaches it (and allocates the unit's gradient
//    bucket); once the unit's gradients are final they are reduce-scattered,
//    added into the owned slice, and parameters and gradients released. The
//    root unit is gathered at each micro-step's start and released after its
//    gradients. Accumulation reduce-scatters every micro-step. For evaluation
//    and saving, the whole model is gathered to every rank (every
//    --eval-every steps, for checkpoints and at the end) and released at the
//    next step.
//    With --offload params the owned slices live in a file on disk (core/
//    Offload.h): each is written out after its gathers and the update, and
//    read back (ahead, on the file's I/O thread) before the next use.
//  - Elementwise optimizers only (sgd, adam, adamw, adagrad): LARS and LAMB need whole
//    tensors' norms.
//  - --compress fp16|bf16 (stages 1 and 2) reduce-scatters the gradients in
//    16 bits (ZeroOptions::gradientWire): 0.75x the bytes of a step.
#include <memory>
#include <vector>

#include "comm/Communicator.h"
#include "core/Offload.h"
#include "optim/Factory.h"
#include "nn/Module.h"
#include "parallel/StepTraffic.h"
#include "parallel/Strategy.h"
#include "parallel/allreduce/FusionBuckets.h"

namespace dtrain::parallel::zero {

// Stage 2: gradient buckets allocated ahead of the one backward is filling
// (onGradReady); plan/MemoryModel.cpp counts them.
inline constexpr size_t kBucketsAhead = 2;

struct ZeroOptions {
  int stage = 1;  // 1, 2 or 3
  int64_t gatherEvery = 0;  // stage 3: steps between whole-model gathers (--eval-every); 0: end only
  // Stage 3, --offload params: the owned parameter slices live in a file in
  // optimizerOptions.offloadDir (core/Offload.h), read in for each gather and
  // the update and written out after.
  bool offloadParams = false;
  double fusionMb = 0.25;
  // --compress fp16|bf16 (stages 1 and 2): gradients are reduce-scattered in
  // this 16-bit type (each cast after the 1/N of the mean, summed in fp32 per
  // hop by the comm layer, as the allreduce's cast compressors), half the
  // bytes of the reduce-scatter; the parameters' allgather stays fp32, exact.
  DType gradientWire = DType::F32;
  std::string optimizer = "adam";  // the shard optimizer's kind and settings
  optim::OptimizerOptions optimizerOptions{};
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
  void beginMicroStep(int index, int count) override;
  void finishGradients() override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  // The owned pieces of the averaged gradient (what the shard optimizer reads).
  std::vector<GradientPiece> heldGradients(nn::Module& model) override;
  bool shardsGradients() const override { return true; }
  // Stages 1 and 2: each named parameter gets a bucket of its own, so its
  // owned piece is the same range on every rank of the same index.
  void isolateParameters(const std::vector<std::string>& names) override;
  double gradNormSquared(nn::Module& model) override;
  double reduceMetric(double localValue) override;
  bool anyRankStops(bool mine) override;
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  std::map<std::string, double> stats() const override;
  // Gathers every rank's optimizer shard into full per-parameter state; the
  // reporter writes it into the trainer's optimizer in syncModel (--save).
  std::map<std::string, Tensor> checkpointState() override;
  void syncModel(nn::Module& model, optim::Optimizer* optimizer) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;


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
  // gradientWire: bucket b's 16-bit reduce-scatter.
  void launchWire16(size_t bucket, const comm::Options& options);
  void buildShardOptimizer(const optim::Optimizer& full);

  // Stage 3 (ZeroStage3.cpp).
  // One bucket per unit, in backward order (the root unit last).
  std::vector<FusionBucket> makeUnitBuckets(nn::Module& model);
  void shardParameters();  // after setup: keep the owned slices, release the rest
  autograd::Variable runUnit(size_t bucket, const autograd::Variable& x, const nn::Module::Forward& forward);
  void enterBackward(size_t bucket);
  // Waits for a prefetch, or gathers now (always: even when resident).
  void gatherParams(size_t bucket, bool always = false);
  // Starts an asynchronous gather; direction: +1 in backward, -1 in forward.
  void prefetchParams(size_t bucket, int direction);
  void releaseParams(size_t bucket);
  void drainReduced(size_t bucket);    // its reduce-scatter done: add, release
  void drainFinished(bool all);        // those finished (all: waits for every one)
  // Collective: the whole model on every rank; kept where `keep`.
  void gatherWhole(bool keep);
  void releaseWhole();

  comm::Communicator& comm_;
  ZeroOptions opts_;
  std::vector<FusionBucket> buckets_;      // gradients (stage 2: only during a step)
  std::vector<Tensor> paramFlat_;          // per bucket, padded like it
  std::vector<Tensor> gradShard_;          // per bucket: the owned, averaged slice
  std::vector<std::vector<std::string>> bucketNames_;  // per bucket, its parameters' names
  std::vector<Piece> pieces_;              // the shard optimizer's parameters, in order
  std::unique_ptr<optim::Optimizer> shard_;
  std::vector<comm::WorkPtr> work_;        // per bucket, this step's reduce-scatter
  std::vector<Tensor> wireIn_, wireOut_;   // per bucket: its 16-bit send and shard (gradientWire)
  std::vector<size_t> ready_;
  size_t nextLaunch_ = 0;
  bool syncing_ = true;
  std::map<std::string, Tensor> gathered_;  // checkpointState, on the reporter
  std::vector<std::string> isolated_;       // isolateParameters

  // Stage 3.
  std::vector<Tensor> paramShard_;          // per bucket: the owned slice of the parameters
  std::shared_ptr<memory::OffloadFile> paramFile_;  // --offload params: where paramShard_ lives
  void evictShard(size_t bucket);           // --offload params: written out, dropped
  std::vector<Tensor> reduced_;             // per bucket: a micro-step's reduce-scatter output
  std::vector<comm::WorkPtr> gatherWork_;   // per bucket: a prefetch in flight
  std::vector<nn::Module*> unitModules_;    // per bucket: the block (null: the root unit)
  std::vector<bool> inBackward_;            // per bucket: backward reached it this micro-step
  bool whole_ = false;                      // every unit gathered (evaluation, saving)
  int64_t step_ = 0;

  // Per-step figures of stats(), as DataParallel's; the reduce-scatters run
  // from the first launch (during backward: hidden) to finishGradients.
  StepTraffic traffic_;
  double firstLaunchUs_ = 0;
};

}  // namespace dtrain::parallel::zero
