#pragma once
// Tensor parallelism (Megatron-style) with data parallelism across groups:
// the "tensor" strategy of a dp x tp mesh (--tensor-parallel T, --workers dp*T;
// parallel/Mesh.h: --placement pack keeps a group on neighbouring ranks).
//
// Every rank builds the whole model from the seed (the same initial values),
// then Shards::cut (nn::tensorParallelize) keeps its slice of the column- and
// row-parallel layers (nn/TensorParallelLayers.h), whose forward and backward sum
// over the group (Megatron's f and g). Replicated parameters get identical
// gradients on every rank of a group, so the step needs no other
// communication; the dp dimension averages each rank's gradients (its slices
// and the replicated ones) with the dp strategy (DataParallel with fusion,
// overlap and any compressor, or ZeRO 1/2) on the communicator of the ranks
// holding the same slice.
//
// Clipping by the global norm: over the pieces the dp strategy holds
// (Strategy::heldGradients), the slices' squares from every rank and the
// replicated parameters' from slice 0. The reporter (rank 0) evaluates and saves
// the whole model: at the end, every --eval-every steps and before a periodic
// checkpoint the group's ranks send it their slices (and, for checkpoints, the
// optimizer state's); syncModel swaps the whole tensors in and turns the cuts
// off, and the next step swaps the slices back. Checkpoints hold whole tensors
// under the usual names, so they load at any T (setup cuts what was loaded).
//
// Krizhevsky's "one weird trick" (--tensor-parallel-style krizhevsky, mlp and
// lenet): the layers below the first cut one run data-parallel inside the
// group (each rank reads its own samples), the cut layers on the group's
// gathered batch, and the output goes back to each rank's rows; the
// gradients of the layers below the cut are summed over the group after the
// dp strategy combined them (it is linear), so dp x T ranks of B samples equal
// one process with dp*T*B.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/Mesh.h"
#include "parallel/Strategy.h"
#include "parallel/tensor/Shards.h"

namespace dtrain::parallel::tensor {

struct TensorParallelOptions {
  int size = 2;                   // T, ranks per group
  bool spread = false;            // --placement spread
  // --tensor-parallel-style krizhevsky: the layers below the cut run
  // data-parallel inside the group ("one weird trick"; nn::dataParallelBelowCut).
  bool dataParallelBelowCut = false;
  int64_t gatherEvery = 0;        // steps between gathers to the reporter (--eval-every); 0: end only
  bool gatherOptimizer = false;   // the reporter saves a checkpoint: gather optimizer state too
  // The dp dimension's gradient averaging (when dp > 1).
  std::function<std::unique_ptr<Strategy>(comm::Communicator& replicas)> makeDataParallel;
};

class TensorParallel final : public Strategy {
 public:
  // Collective over `world` (splits it into the mesh); `world` must outlive this.
  TensorParallel(comm::Communicator& world, TensorParallelOptions options);
  ~TensorParallel() override;

  std::string name() const override { return "tensor"; }
  int rank() const override { return world_.rank(); }
  int worldSize() const override { return world_.size(); }
  // Megatron: a group's ranks read the same samples; krizhevsky: each its own.
  int dataRank() const override {
    return opts_.dataParallelBelowCut ? mesh_.coord().replica * mesh_.tp() + mesh_.coord().slice
                                      : mesh_.coord().replica;
  }
  int dataReplicas() const override { return mesh_.dp() * (opts_.dataParallelBelowCut ? mesh_.tp() : 1); }
  bool ownsProcess() const override;

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override;
  void beginMicroStep(int index, int count) override;
  void finishGradients() override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  void zeroGradients(nn::Module& model) override;
  double gradNormSquared(nn::Module& model) override;
  void scaleGradients(nn::Module& model, float coef) override;
  double reduceMetric(double localValue) override;
  bool anyRankStops(bool mine) override;
  void syncModel(nn::Module& model, optim::Optimizer* optimizer) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;
  // Collective: gathers the whole model and optimizer state to the reporter
  // (a periodic checkpoint follows); no per-rank state of its own.
  std::map<std::string, Tensor> checkpointState() override;
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  // tensor_parallel (T), tensor_parallel_replicas (dp), tp_bytes_sent_per_step
  // (this rank's sends within its group per step: f and g), parameters_per_rank
  // (the floats this rank holds), and the dp strategy's figures.
  std::map<std::string, double> stats() const override;

 private:
  // The reporter's group gathers its slices to the reporter.
  void gather(bool withOptimizer);
  // krizhevsky: sums the gradients of the layers below the cut over the group.
  void sumBelowCut();

  comm::Communicator& world_;
  TensorParallelOptions opts_;
  Mesh mesh_;
  std::unique_ptr<Shards> shards_;
  std::unique_ptr<Strategy> dataParallel_;  // null when dp = 1
  nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;
  std::vector<size_t> allParams_;           // every optimizer index
  std::set<std::string> belowCut_;          // krizhevsky: parameters run data-parallel in the group
  int64_t step_ = 0, steps_ = 0;
  uint64_t groupBytesAtStart_ = 0;
  int64_t floatsHeld_ = 0;
};

}  // namespace dtrain::parallel::tensor
