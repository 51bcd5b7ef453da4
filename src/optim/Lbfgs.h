#pragma once
// L-BFGS (Nocedal & Wright, Alg. 7.4) with a backtracking (Armijo) line search
// on the step's batch loss: one step() is one L-BFGS iteration. The two-loop
// recursion follows torch.optim.LBFGS (its ro, al, be, H_diag = y.s / y.y from
// the newest pair, the first step's t = min(1, 1/|g|_1) * lr). Unlike torch, a
// step is one iteration (torch's max_iter iterations), and the curvature pair
// (s, y) is measured on the same batch (y = g(x + s) - g(x), both on the batch
// the step was given), so that mini-batches of changing samples do not mix.
//
// The line search re-evaluates the loss: the trainer sets a closure before
// each step (Optimizer::setLossClosure) that recomputes the loss and the
// gradients at the current parameters on the step's batch.
//
// The history lives in this object, not in per-parameter slots: checkpoints
// carry it as global state ("lbfgs@s.<k>", "lbfgs@y.<k>", oldest first, each
// the flat parameter vector), so a resumed run continues bitwise.
#include <deque>
#include <vector>

#include "optim/Optimizer.h"

namespace dtrain::optim {

struct LbfgsOptions {
  double lr = 1.0;           // the line search's first trial step
  int history = 10;          // curvature pairs kept (m)
  double c1 = 1e-4;          // Armijo's sufficient decrease
  int maxTrials = 25;        // halvings of the step before giving up on this batch
  double toleranceGrad = 1e-7;  // max |g| below this: converged, no step
};

// a . b summed in double in index order: every dot product of the iteration
// (Sandblaster's shards use it on their slices, so that one shard is bitwise
// this optimizer).
double lbfgsDot(const std::vector<float>& a, const std::vector<float>& b);

// The two-loop recursion: the L-BFGS direction -H g for the pairs (s[i], y[i])
// (oldest first) and the initial Hessian inverse hDiag * I. With no pairs: -g.
std::vector<float> lbfgsDirection(const std::vector<float>& g,
                                  const std::deque<std::vector<float>>& s,
                                  const std::deque<std::vector<float>>& y, double hDiag);

class Lbfgs final : public Optimizer {
 public:
  Lbfgs(NamedParameters params, LbfgsOptions o);
  const char* name() const override { return "lbfgs"; }
  std::string describe() const override;
  std::vector<std::string> slotNames() const override { return {}; }
  bool needsLossClosure() const override { return true; }
  using Optimizer::step;
  // One iteration: direction from the history, backtracking line search
  // through the closure, then the new curvature pair.
  void step() override;

  std::vector<std::pair<std::string, Tensor>> globalState() const override;
  std::vector<std::string> checkGlobalState(const std::map<std::string, Tensor>& state) const override;
  void setGlobalState(const std::map<std::string, Tensor>& state) override;

  const LbfgsOptions& options() const { return o_; }

  // Figures of the last step (tests, logs).
  int lastEvaluations() const { return lastEvaluations_; }
  double lastStepLength() const { return lastT_; }
  size_t historySize() const { return s_.size(); }

 protected:
  std::vector<Tensor> initSlots(const Tensor&) const override { return {}; }
  void update(float*, const float*, int64_t, int64_t, double, bool, std::vector<Tensor>&) override;

 private:
  std::vector<float> flatGrad();
  void setParams(const std::vector<float>& x0, const std::vector<float>& d, double t);
  LbfgsOptions o_;
  std::deque<std::vector<float>> s_, y_;
  double hDiag_ = 1.0;
  int lastEvaluations_ = 0;
  double lastT_ = 0;
};

}  // namespace dtrain::optim
