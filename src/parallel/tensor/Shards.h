#pragma once
// A rank's side of tensor parallelism, shared by the strategies that cut
// layers (TensorParallel: dp x tp; PipelineParallel: a stage's layers in
// dp x pp x tp): the group's sum for Megatron's f and g, the cut of a module
// (and of optimizer state already loaded), and the gather of the slices to the
// group's rank 0, which can swap the whole tensors into its model and
// optimizer (to evaluate or save) and back.
#include <memory>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "nn/Module.h"
#include "nn/TensorParallelLayers.h"
#include "optim/Optimizer.h"

namespace dtrain::parallel::tensor {

class Shards {
 public:
  // `group` (the ranks holding the slices of the same layers; this rank's index
  // in it is its slice) must outlive this.
  explicit Shards(comm::Communicator& group);

  // Cuts `modules` (the model, or a pipeline stage's layers) for the group and
  // the optimizer state that exists (a loaded checkpoint's); every later
  // allocation of state follows the sliced parameters.
  void cut(nn::Module& modules, optim::Optimizer& optimizer);
  const nn::TensorParallelPlan& plan() const { return plan_; }
  // What the cut layers compute with (the group's sum and gather, active or not).
  const std::shared_ptr<nn::TensorParallelGroup>& context() const { return context_; }
  bool isCut(size_t optimizerIndex) const;
  int size() const { return group_.size(); }
  int slice() const { return group_.rank(); }
  comm::Communicator& group() { return group_; }

  // Collective over the group: every rank sends its slices (and, withOptimizer,
  // the optimizer state's slices) to the group's rank 0, which assembles them.
  void gather(bool withOptimizer);
  // Rank 0 of the group, after gather(): the parameters (and the state, when
  // gathered) become the whole tensors and the layers compute as one process.
  void swapInWholeTensors(bool withState);
  // Back to the slices (every rank may call it; a no-op where nothing is swapped).
  void restoreSlices();
  bool gathered() const { return !params_.empty(); }

 private:
  struct Swap {
    Tensor* slot = nullptr;
    Tensor whole, slice;
  };
  comm::Communicator& group_;
  std::shared_ptr<nn::TensorParallelGroup> context_;
  nn::TensorParallelPlan plan_;
  optim::Optimizer* optimizer_ = nullptr;
  std::vector<autograd::Variable> cutVars_;  // plan_'s parameters, in plan order
  std::vector<size_t> cutParams_;  // optimizer indices of the trained ones among them
  std::vector<Swap> params_, state_;  // the root's; state_ only after a gather with the optimizer
  bool paramsSwapped_ = false, stateSwapped_ = false;
};

}  // namespace dtrain::parallel::tensor
