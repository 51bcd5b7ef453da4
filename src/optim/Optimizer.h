#pragma once
// Optimizers with named, shardable state.
//
// An optimizer holds an ordered list of named parameters. Its state lives per
// parameter in named slots ("<param>.momentum_buffer", "<param>.exp_avg", ...)
// plus a per-parameter step count ("<param>.step", an I64 scalar, like torch's
// per-parameter state['step']), so that
//   - ZeRO can update, and allocate state for, only the parameters a rank owns
//     (step(which), ensureState(which)), and
//   - a checkpoint can save namedState() and load it into a fresh optimizer
//     after ensureState().
// The update rules are exactly those of torch.optim 1.13 (single-tensor path),
// op for op: on a build with FMA the results are bitwise equal to torch's on
// AVX2 CPUs (tests/optim/TorchGoldenTest.cpp).
//
// Typical loop: opt.setLr(schedule.lrAt(opt.stepCount())); backward; opt.step();
// opt.zeroGrad().
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/Variable.h"
#include "core/Offload.h"
#include "core/ThreadPool.h"

namespace dtrain::optim {

using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;

class Optimizer {
 public:
  Optimizer(NamedParameters params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "sgd", "adam", "adamw", "adagrad".
  virtual const char* name() const = 0;
  // One line with the hyperparameters, e.g. "SGD(lr=0.05, momentum=0.9, ...)".
  virtual std::string describe() const = 0;

  // Updates every parameter whose grad is defined, then counts one step.
  // (Virtual for L-BFGS, which updates all parameters at once.)
  virtual void step();
  // Updates only the parameters with these indices (ZeRO: the ones this rank
  // owns; each index at most once), then counts one step.
  void step(const std::vector<size_t>& which);
  // Updates parameter i from its grad (no-op when the grad is undefined). Does
  // not count a step: step counts drive nothing but checkpoints and logs; the
  // bias corrections use the per-parameter step.
  void updateParameter(size_t i);

  // torch 1.13 default (set_to_none=False): zero the grads in place.
  void zeroGrad();

  double lr() const { return lr_; }
  void setLr(double lr);

  // Optimizers that re-evaluate the loss within a step (L-BFGS's line search)
  // need a closure that sets the gradients to those of the step's batch at the
  // current parameters and returns that batch's loss; `lossNow` is the loss at
  // the parameters the gradients were computed at. The trainer sets it before
  // each step when needsLossClosure(); the others never call it.
  using LossClosure = std::function<double()>;
  virtual bool needsLossClosure() const { return false; }
  void setLossClosure(LossClosure f, double lossNow) {
    closure_ = std::move(f);
    lossNow_ = lossNow;
  }

  size_t size() const { return params_.size(); }
  const std::string& paramName(size_t i) const { return params_.at(i).first; }
  autograd::Variable& param(size_t i) { return params_.at(i).second; }
  const NamedParameters& params() const { return params_; }
  std::optional<size_t> indexOf(const std::string& paramName) const;

  // Names of the per-parameter tensor slots besides "step" (e.g. {"exp_avg", "exp_avg_sq"}).
  virtual std::vector<std::string> slotNames() const = 0;

  // State of the whole optimizer rather than of one parameter (L-BFGS's
  // curvature pairs over the flat parameter vector): key -> tensor, saved in
  // checkpoints as "optimizer.<key>". Keys start with the optimizer's name and
  // a '@' ("lbfgs@s.0"), which no "<param>.<slot>" key contains. Default: none.
  virtual std::vector<std::pair<std::string, Tensor>> globalState() const { return {}; }
  // Problems with state a checkpoint holds for globalState()'s keys (keys of
  // another layout, wrong sizes), one line each; empty: setGlobalState may load it.
  virtual std::vector<std::string> checkGlobalState(const std::map<std::string, Tensor>& state) const;
  // Replaces the global state with a checked one (empty: a fresh optimizer's).
  virtual void setGlobalState(const std::map<std::string, Tensor>&) {}

  // Allocates the state of every parameter (or of those in `which`) now, with
  // the values a fresh optimizer has (torch's lazy init on first step is
  // reproduced through the per-parameter step, which starts at 0).
  void ensureState();
  void ensureState(const std::vector<size_t>& which);
  bool hasState(size_t i) const { return steps_.at(i).defined(); }
  // Frees all state (back to a fresh optimizer); hyperparameters stay.
  void resetState();
  // Frees the state of the parameters in `which` only (a pipeline stage
  // drops the other stages' after loading a checkpoint).
  void resetState(const std::vector<size_t>& which);

  // Allocated state as "<param>.<slot>" -> tensor, in parameter order, "step"
  // (I64, shape [1]) first for each parameter, then slotNames(). Pointers stay
  // valid until resetState() or destruction; writing through them (checkpoint
  // load) sets the state.
  std::vector<std::pair<std::string, Tensor*>> namedState();
  // The same for the parameters in `which`, in that order.
  std::vector<std::pair<std::string, Tensor*>> namedState(const std::vector<size_t>& which);
  // Bytes of allocated state (ZeRO reports how sharding shrinks it).
  int64_t stateBytes() const;

  // Parameter groups as nanoGPT makes them: weight decay only for parameters
  // with >= 2 dimensions (matrices, embeddings), none for biases and norm
  // weights. Off by default (every parameter decays, as torch's single group).
  // `sourceDims`, when given (one per parameter), are the dimensions of the
  // tensors the parameters are flat slices of (a parameter server's shard):
  // the rule then follows the source tensor, not the 1-D slice.
  void setDecay2dOnly(bool on, const std::vector<int64_t>& sourceDims = {});
  bool decay2dOnly() const { return decay2dOnly_; }
  bool decays(size_t i) const { return decay_.at(i) != 0; }

  // Trust-ratio optimizers (LARS, LAMB) scale a tensor's update by norms of
  // the whole tensor. Where the parameters are slices of tensors spread over
  // ranks (ZeRO's pieces), the strategy says which tensor each parameter is a
  // slice of (tensorOf[i] in [0, tensors)) and how to add the per-slice
  // partial squared norms over the ranks (`sumOverRanks`: the same totals on
  // every rank). step() then runs in two passes, calling sumOverRanks once
  // between them on every step (a collective: every rank steps).
  using NormSum = std::function<void(std::vector<double>& partials)>;
  virtual bool usesTensorNorms() const { return false; }
  void setTensorGroups(std::vector<int64_t> tensorOf, int64_t tensors, NormSum sumOverRanks);

  // Number of step() calls so far (saved in checkpoints).
  int64_t stepCount() const { return stepCount_; }
  void setStepCount(int64_t n) { stepCount_ = n; }

  // --offload optimizer: the slots (not the step counts) are allocated in
  // `file` from now on (state already allocated stays where it is) and live
  // on disk between updates: step() reads parameter i+1's state in while it
  // updates parameter i, and writes i's back out after (core/Offload.h).
  void setOffload(std::shared_ptr<memory::OffloadFile> file) { offload_ = std::move(file); }
  memory::OffloadFile* offload() const { return offload_.get(); }

 protected:
  // Fresh slot tensors for parameter i, in slotNames() order.
  virtual std::vector<Tensor> initSlots(const Tensor& param) const = 0;
  // Applies one update to p (n floats) from g; `step` is the parameter's step
  // count after incrementing (1 on the first update); slots as initSlots made them.
  // `decay` false: skip weight decay for this parameter (setDecay2dOnly).
  virtual void update(float* p, const float* g, int64_t n, int64_t step, double lr, bool decay,
                      std::vector<Tensor>& slots) = 0;
  // Trust-ratio optimizers: the update in two passes, so that a tensor's
  // norms can be summed over its slices in between. accumulateNorms does what
  // comes before the norms (LAMB: the moments) and adds this slice's partial
  // squared norms into norms[0], norms[1]; applyWithNorms applies the update
  // with the whole tensor's. Their update() is the two back to back.
  virtual void accumulateNorms(float* /*p*/, const float* /*g*/, int64_t /*n*/, int64_t /*step*/, bool /*decay*/,
                               std::vector<Tensor>& /*slots*/, double* /*norms*/) {}
  virtual void applyWithNorms(float* /*p*/, const float* /*g*/, int64_t /*n*/, int64_t /*step*/, double /*lr*/,
                              bool /*decay*/, std::vector<Tensor>& /*slots*/, const double* /*norms*/) {}
  const LossClosure& lossClosure() const { return closure_; }
  double lossNow() const { return lossNow_; }

 private:
  NamedParameters params_;
  std::unordered_map<std::string, size_t> index_;
  // Per parameter: the step count (I64 [1], undefined until allocated) and slots.
  std::vector<Tensor> steps_;
  std::vector<std::vector<Tensor>> slots_;
  std::vector<char> decay_;  // per parameter: weight decay applies
  bool decay2dOnly_ = false;
  double lr_;
  int64_t stepCount_ = 0;
  std::shared_ptr<memory::OffloadFile> offload_;
  LossClosure closure_;
  double lossNow_ = 0;

  // Offload: queue parameter i's slots to be read in / written out.
  void prefetchState(size_t i);
  void evictState(size_t i);
  void updateInOrder(const std::vector<size_t>& order);
  // The parameter's step count after this update, or null when it has no
  // gradient (no update); allocates its state on first use.
  int64_t* advance(size_t i);
  void updateWithTensorNorms(const std::vector<size_t>& order);
  std::vector<int64_t> tensorOf_;
  int64_t tensors_ = 0;
  NormSum sumOverRanks_;
};

namespace detail {
// a * b + c rounded once, where the CPU has FMA: torch's AVX2 kernels compute
// add(x, alpha=a) and addcmul with fused multiply-adds, and using the same
// operations in the same order makes our updates bitwise equal to torch's.
// (The optim target compiles with -ffp-contract=off so the compiler fuses
// nothing else.)
inline float madd(float a, float b, float c) {
#ifdef __FMA__
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// Whether this library was built with FMA (then updates are bitwise equal to
// torch 1.13's on AVX2 CPUs; otherwise they may differ in the last bit).
bool builtWithFma();

// Runs fn(lo, hi) over [0, n), across the thread pool only when n is large
// enough that waking it pays off (updates are memory-bound streams), so the
// one-thread path builds no std::function.
template <typename F>
void forRange(int64_t n, F&& fn) {
  constexpr int64_t kGrain = int64_t{1} << 15;
  if (n <= 0) return;
  if (n <= kGrain || numThreads() <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  parallelFor(0, n, kGrain, [&](int64_t lo, int64_t hi) { fn(lo, hi); });
}
// Throws UsageError "invalid <flag> <value>: <why>" unless ok.
void checkHyper(bool ok, const char* flag, double value, const char* why);
// Adam's (and LAMB's) betas in [0, 1), eps and weight decay finite and >= 0.
void checkAdamHyper(double beta1, double beta2, double eps, double weightDecay);
}  // namespace detail

}  // namespace dtrain::optim
