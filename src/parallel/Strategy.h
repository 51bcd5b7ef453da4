#pragma once
// The one interface through which every parallel strategy plugs into the
// trainer. The trainer owns the loop (data, forward, loss, backward, metrics);
// a strategy owns what differs between strategies: how replicas start, what
// happens to gradients during and after backward, how the update is applied,
// and which rank reports. A new strategy is a new folder under parallel/, not
// an edit of the trainer.
//
// One step, as the trainer drives it (K = gradient accumulation micro-steps):
//   beginStep(step); zeroGradients(model)
//   forwardBackward(model, work)  -- the step schedule; the default runs
//       for k in 0..K-1: beginMicroStep(k, K); forward; loss; backward   (hooks may fire)
//     and a pipeline (parallel/pipeline/) runs its stage's part of GPipe or 1F1B
//   finishGradients(); applyUpdate(optimizer)
// A strategy whose ranks run at their own pace (parameter servers, Hogwild!)
// may end a rank's loop early (stopBefore), refreshes the reporter's replica
// before it is evaluated or saved (syncModel), and says goodbye (finish).
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/Memory.h"
#include "nn/Module.h"
#include "optim/Optimizer.h"
#include "parallel/SpanRecorder.h"

namespace dtrain::parallel {

// A piece of a parameter's final gradient (Strategy::heldGradients): elements
// [offset, offset + grad.numel()) of the flattened gradient of parameter `name`
// (the optimizer's name), `grad` a contiguous view the update reads.
struct GradientPiece {
  std::string name;
  int64_t offset = 0;
  Tensor grad;
};

// Sum of the squares of a tensor's floats, in double.
double sumOfSquares(const Tensor& t);
// Each of `model`'s defined gradients whole, as a flat view (the default
// Strategy::heldGradients).
std::vector<GradientPiece> wholeGradients(nn::Module& model);

// One optimizer step's samples and the task's loss, as the trainer hands them
// to the strategy's step schedule (Strategy::forwardBackward).
struct StepWork {
  Tensor x, y;              // this data-parallel replica's samples, along dim 0
  int microBatches = 1;     // x and y cut into this many slices ...
  int64_t microBatchSize = 0;  // ... of this many samples
  // The global step and epoch x and y belong to (-1: not from the trainer's
  // loop): where a Sandblaster worker reads the same batch itself.
  int64_t step = -1, epoch = -1;
  // The task's loss (a mean over the micro-batch) from the model's output
  // (runtime::Task::lossFromOutput): a pipeline's last stage calls it.
  std::function<autograd::Variable(const autograd::Variable& output, const Tensor& y)> lossFromOutput;
  // Where the schedule records its spans (null: none).
  SpanRecorder* spans = nullptr;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int rank() const { return 0; }
  virtual int worldSize() const { return 1; }
  // This rank's data-parallel replica and their number: which slice of the
  // global batch it reads (a pipeline's stages of one replica read the same).
  virtual int dataRank() const { return rank(); }
  virtual int dataReplicas() const { return worldSize(); }
  // Rank 0 prints progress, metrics and the final line.
  bool isReporter() const { return rank() == 0; }
  // False when several ranks share this process (local backend threads): then
  // process-wide settings (intra-op threads) belong to the launcher, not to
  // each rank's trainer.
  virtual bool ownsProcess() const { return true; }

  // Once, after the model and optimizer exist and a checkpoint (if any) is
  // loaded: make replicas identical, install gradient-ready hooks.
  virtual void setup(nn::Module& model, optim::Optimizer& optimizer) {}
  // Before each step's first forward pass.
  virtual void beginStep(int64_t step) {}
  // Before micro-step `index` of `count` (gradient accumulation); gradients
  // are combined across ranks only during the last one's backward.
  virtual void beginMicroStep(int index, int count) {}
  // Before the step's forwards: zero the gradients this rank accumulates into
  // (a pipeline stage: only its own layers').
  virtual void zeroGradients(nn::Module& model) { model.zeroGrad(); }
  // The step's forwards and backwards; returns the mean loss over its
  // micro-batches (0 where this rank computes no loss, e.g. a pipeline stage
  // before the last; reduceMetric combines). Gradients accumulate to the mean
  // over every sample of the step. Default: gradient accumulation (StepSchedule.cpp).
  virtual double forwardBackward(nn::Module& model, const StepWork& work);
  // After the last backward returned: every gradient must be final and combined.
  virtual void finishGradients() {}
  // Applies the update for this step.
  virtual void applyUpdate(optim::Optimizer& optimizer) { optimizer.step(); }
  // The parts of the final gradient this rank holds for the update, after
  // finishGradients(). Default: each of the model's gradients whole.
  // Strategies whose ranks keep only a shard of them (ZeRO) return their shard.
  virtual std::vector<GradientPiece> heldGradients(nn::Module& model);
  // True when the ranks of this strategy hold disjoint pieces of the gradient
  // (ZeRO), false when each holds all of it (replicas after an allreduce): an
  // enclosing strategy (a pipeline's or tensor-parallel group's data-parallel
  // dimension) then counts every rank's pieces, or one replica's.
  virtual bool shardsGradients() const { return false; }
  // Before setup(): parameters whose held gradient an enclosing strategy
  // exchanges piece by piece with a rank that holds other parameters (a
  // pipeline's tied weights): a strategy that shards gradients lays each of
  // them out on its own, the same whatever else the rank holds. Default: no-op.
  virtual void isolateParameters(const std::vector<std::string>& names) {}
  // Squared L2 norm of the whole model's gradient, after finishGradients(), for
  // clipping by the global norm (--clip-grad-norm). Collective where a strategy
  // makes it so: every rank calls it at the same steps. The default sums the
  // held gradients, which is the global gradient for one process and after an
  // allreduce (every replica holds the same averaged gradient); strategies whose
  // ranks hold shards of the gradient (ZeRO, tensor parallelism, parameter
  // servers) override it to sum the shards' squares across ranks.
  virtual double gradNormSquared(nn::Module& model);
  // Multiplies the gradients that the update will read by coef
  // (--clip-grad-norm): the held ones.
  virtual void scaleGradients(nn::Module& model, float coef);
  // After finish(), on every rank: every rank's memory figures (memory_per_rank),
  // in rank order, at least on the reporter. Collective where a strategy makes
  // it so (parallel/MemoryGather.h). Default: this rank's only.
  virtual std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) {
    return {mine};
  }
  // Combines a per-rank scalar (e.g. the loss) into the global mean. Collective
  // for multi-rank strategies: every rank calls it at the same steps.
  virtual double reduceMetric(double localValue) { return localValue; }
  // After each step: true when any rank asks to stop (a Ctrl-C reached one
  // process first), so that every rank stops after the same step. Collective for
  // strategies whose ranks run in lockstep (one tiny allreduce); ranks that run at
  // their own pace (parameter servers, Hogwild!) each stop on their own: default.
  virtual bool anyRankStops(bool mine) { return mine; }
  // False where a rank cannot stop on its own without leaving its peers waiting
  // (synchronous parameter servers): a signal then ends the run without saving.
  virtual bool savesOnStop() const { return true; }
  // Whether a checkpoint taken between two steps (--checkpoint-every, a run's last
  // step) holds the whole run's state. False where ranks run at their own pace
  // (parameter servers, Hogwild!): their last step is saved once every rank finished.
  virtual bool checkpointsBetweenSteps() const { return true; }
  // Strategy-specific figures for the metrics and the final JSON line.
  virtual std::map<std::string, double> stats() const { return {}; }
  // Structured figures known at the end of the run (histograms, per-worker
  // lists), valid after finish(): merged into the final JSON line and written
  // as the metrics file's last record.
  virtual nlohmann::json report() const { return nlohmann::json::object(); }

  // Checked before each step: true ends this rank's loop now (its servers
  // finished, or a fault injection stopped it). Default: run every step.
  virtual bool stopBefore(int64_t step) { return false; }
  // On the reporter only, before it evaluates or saves: make `model` (and,
  // when given, `optimizer`'s state) the current global state. Not collective.
  virtual void syncModel(nn::Module& model, optim::Optimizer* optimizer) {}
  // After this rank's last step, before the final evaluation; every rank calls it.
  virtual void finish(nn::Module& model, optim::Optimizer& optimizer) {}

  // State a checkpoint must carry for a bitwise resume beyond the model and the
  // optimizer (the compressors' error-feedback residuals and PowerSGD factors),
  // which may differ between ranks. Collective: every rank calls it at the same
  // point; returns every rank's tensors on the reporter, named "rank<r>.<name>",
  // and nothing elsewhere. Default: no state.
  virtual std::map<std::string, Tensor> checkpointState() { return {}; }
  // After setup(), on every rank: restores this rank's part of what
  // checkpointState() saved. Not collective.
  virtual void loadCheckpointState(const std::map<std::string, Tensor>& saved) {}

  // Spans for the timeline (null: none). Not owned; outlives the run.
  void setSpanRecorder(SpanRecorder* recorder) { spans_ = recorder; }

 protected:
  SpanRecorder* spans_ = nullptr;
};

// One process, one replica: the plain training loop.
class SingleProcess final : public Strategy {
 public:
  std::string name() const override { return "single"; }
};

}  // namespace dtrain::parallel
