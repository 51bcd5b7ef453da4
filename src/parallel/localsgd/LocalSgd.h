#pragma once
// Local SGD (periodic model averaging; Stich 2019, Lin et al. 2020) and DiLoCo
// (Douillard et al. 2023): every worker takes H optimizer steps on its own
// slice of the global batch (the slice allreduce would give it), then the
// workers average their parameter deltas since the last sync in one pass of
// allreduces and the outer optimizer (OuterOptimizer.h) moves the last-synced
// parameters (the anchor) by that average. Communication is one model's worth
// per H steps instead of one gradient's per step.
//
//  - Post-local SGD (--local-sgd-start-step S): the first S steps are plain
//    allreduce data parallelism (a DataParallel inside, its hooks and buckets,
//    uncompressed); local steps after. The anchor is taken at step S.
//  - The delta travels in fusion-sized chunks of whole parameters, each with
//    a compress::Compressor (--compress; its error-feedback state is per rank).
//  - The inner optimizer's state (Adam's moments, momentum) stays local to
//    each worker and is never averaged.
//  - Float buffers (none in mlp or gpt) are averaged at each sync.
//  - finish() syncs a last, partial period, so the final model is the global one.
//  - Checkpoints: the anchor and outer momentum (identical on every rank) as
//    "outer.*"; every rank's inner optimizer state (and, between syncs, its
//    parameters) as "rank<r>.*", so a resume with the same workers is bitwise;
//    between syncs also "outer.average.*" (the workers' mean parameters), from
//    which a resume with another number of workers starts every worker,
//    keeping the anchor: the period goes on as if the workers had been averaged.
#include <memory>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/Strategy.h"
#include "parallel/allreduce/DataParallel.h"
#include "parallel/compress/Compressor.h"
#include "parallel/localsgd/OuterOptimizer.h"

namespace dtrain::parallel::localsgd {

struct LocalSgdOptions {
  int64_t syncEvery = 4;   // H: inner steps between syncs
  int64_t startStep = 0;   // S: synchronous allreduce steps first (post-local SGD)
  OuterOptions outer;
  double fusionMb = kDefaultFusionMb;        // delta chunks (and warm-up buckets)
  comm::Algorithm algo = comm::Algorithm::Auto;
  bool overlap = true;                       // the warm-up allreduce's
  compress::CompressOptions compress;        // of the averaged delta
};

class LocalSgd final : public Strategy {
 public:
  // `comm` must outlive the strategy.
  LocalSgd(comm::Communicator& comm, LocalSgdOptions options);
  ~LocalSgd() override;

  std::string name() const override { return "local-sgd"; }
  int rank() const override { return comm_.rank(); }
  int worldSize() const override { return comm_.size(); }
  bool ownsProcess() const override { return std::string(comm_.backend()) != "local"; }

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override;
  void beginMicroStep(int index, int count) override;
  void finishGradients() override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  double reduceMetric(double localValue) override;
  // Every rank runs every step: the ranks vote after each (mid-period is fine,
  // checkpointState saves the period's state).
  bool anyRankStops(bool mine) override { return reduceMetric(mine ? 1.0 : 0.0) > 0; }
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;
  std::map<std::string, Tensor> checkpointState() override;
  void loadCheckpointState(const std::map<std::string, Tensor>& saved) override;
  // syncs, sync_every, local_sgd_start_step, sync_ms (mean per sync),
  // comm_ms (per step: syncs and warm-up allreduces), comm_s_total,
  // bytes_sent_total, bytes_sent_per_worker (per step), compressed_bytes_per_sync.
  std::map<std::string, double> stats() const override;

  // Averages the workers' deltas and takes the outer step now (collective).
  void synchronize();
  int64_t syncs() const { return syncs_; }

 private:
  bool warmup(int64_t step) const { return step < opts_.startStep; }
  void captureAnchor();
  // This rank's state that differs between ranks, by name (without "rank<r>.").
  std::vector<std::pair<std::string, Tensor*>> perRankState(bool withParams);

  comm::Communicator& comm_;
  LocalSgdOptions opts_;
  OuterOptimizer outer_;
  std::unique_ptr<DataParallel> warmup_;  // S > 0 only
  nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;

  std::vector<std::pair<std::string, autograd::Variable>> params_;
  std::vector<Tensor> anchor_, momentum_;  // per parameter; momentum_ empty without momentum
  struct Chunk {
    std::vector<size_t> params;  // indices into params_
    Tensor delta;                // flat, the parameters' deltas back to back
    std::unique_ptr<compress::Compressor> compressor;
  };
  std::vector<Chunk> chunks_;

  int64_t step_ = 0;
  int64_t pending_ = 0;  // local steps since the anchor
  int64_t syncs_ = 0;
  int64_t steps_ = 0, warmupSteps_ = 0;
  double syncUs_ = 0, payloadBytes_ = 0;
};

}  // namespace dtrain::parallel::localsgd
