#pragma once
// Tensor parallelism (Megatron-style) with data parallelism across groups:
// the "tensor" strategy of a dp x tp mesh (--tensor-parallel T, --workers dp*T).
//
// Mesh: tp groups innermost (--placement pack: rank = replica * T + tp rank,
// a group on neighbouring ranks, the same host under mpirun's by-core mapping;
// spread: rank = tp rank * dp + replica), two Communicator::splits as the
// pipeline's mesh (parallel/pipeline/Mesh.h).
//
// Every rank builds the whole model from the seed (the same initial values),
// then nn::tensorParallelize cuts it: each rank keeps its slice of the
// column- and row-parallel layers (nn/TensorParallel.h), whose forward and
// backward sum over the group (Megatron's f and g). Replicated parameters get
// identical gradients on every rank of a group, so the step needs no other
// communication; the dp dimension averages each rank's gradients (its slices
// and the replicated ones) with the allreduce strategy (DataParallel, fusion,
// overlap, --compress) on the communicator of the ranks holding the same slice.
//
// Clipping by the global norm: the slices' squares summed over the group plus
// the replicated parameters' once. The reporter (rank 0) evaluates and saves
// the whole model: at the end and every --eval-every steps the group's ranks
// send it their slices (and, for checkpoints, the optimizer state's slices);
// syncModel swaps the whole tensors in and turns the cuts off, and the next
// step swaps the slices back. Checkpoints hold whole tensors under the usual
// names, so they load at any T (setup cuts whatever was loaded).
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "nn/TensorParallel.h"
#include "parallel/Strategy.h"

namespace dtrain::parallel::tensor {

struct TensorParallelOptions {
  int size = 2;                   // T, ranks per group
  bool spread = false;            // --placement spread
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
  int dataRank() const override { return replica_; }
  int dataReplicas() const override { return world_.size() / opts_.size; }
  bool ownsProcess() const override;

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override;
  void beginMicroStep(int index, int count) override;
  void finishGradients() override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  double gradNormSquared(nn::Module& model) override;
  double reduceMetric(double localValue) override;
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
  // The group's slices (and optimizer state slices) to its rank 0, which
  // writes them into whole tensors (replica 0's group only: the reporter's).
  void gather(bool withOptimizer);
  // The reporter's model (and optimizer state) between its slices and the
  // gathered whole tensors.
  void swapInWholeTensors(bool withState);
  void restoreSlices();

  comm::Communicator& world_;
  TensorParallelOptions opts_;
  int replica_ = 0, tpRank_ = 0;
  std::unique_ptr<comm::Communicator> group_, replicas_;
  std::unique_ptr<Strategy> dataParallel_;  // null when dp = 1
  std::shared_ptr<nn::TensorParallelGroup> context_;
  nn::TensorParallelPlan plan_;
  optim::Optimizer* optimizer_ = nullptr;
  std::vector<size_t> cutParams_;      // optimizer indices of the cut parameters (plan order)
  std::vector<size_t> wholeParams_;    // and of the replicated ones
  // The reporter's gathered whole tensors and the slices they stand in for
  // while swapped in: (slot, whole, slice).
  struct Swap {
    Tensor* slot;
    Tensor whole, slice;
  };
  std::vector<Swap> params_, state_;  // state_: only after a gather with the optimizer
  bool paramsSwapped_ = false, stateSwapped_ = false;
  int64_t step_ = 0, steps_ = 0;
  uint64_t groupBytesAtStart_ = 0;
  int64_t floatsHeld_ = 0;
};

}  // namespace dtrain::parallel::tensor
