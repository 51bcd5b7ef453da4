#pragma once
// Module: a node of the model tree holding named parameters, buffers and child
// modules. Names are hierarchical ("1.weight", "features.0.bias") and, for the
// built-in models, identical to the PyTorch state_dict keys of the equivalent
// nn.Sequential, with the same layouts.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/Variable.h"
#include "nn/TensorParallelLayers.h"

namespace dtrain::nn {

using autograd::Variable;

class Module {
 public:
  virtual ~Module() = default;
  virtual Variable forward(const Variable& x) = 0;
  // forward(x), under activation recomputation when setRecompute(true) was
  // called (autograd/Recompute.h; --recompute, nn/RecomputeModes.h).
  Variable operator()(const Variable& x);
  void setRecompute(bool on) { recompute_ = on; }
  // Runs around operator()'s forward (and recomputation, when on): gets the
  // input and the forward to call. ZeRO-3 gathers the module's parameters
  // before and releases them after. Null: none.
  using Forward = std::function<Variable(const Variable&)>;
  using ForwardWrapper = std::function<Variable(const Variable& x, const Forward& forward)>;
  void setForwardWrapper(ForwardWrapper wrapper) { wrapper_ = std::move(wrapper); }
  bool recomputes() const { return recompute_; }
  // One line describing this module's own configuration, e.g. "Linear(784, 256)".
  virtual std::string describe() const = 0;
  // (alias, parameter) names of tied weights that PyTorch's state_dict lists
  // twice (GPT's lm_head.weight = transformer.wte.weight): checkpoints write
  // the alias too, so load_state_dict(strict=True) accepts them. None by default.
  virtual std::vector<std::pair<std::string, std::string>> parameterAliases() const { return {}; }
  // Tensor parallelism (nn/TensorParallelLayers.h): cuts what this module knows how
  // to cut for `group`, recording each cut parameter under prefix + its name
  // in `plan`. The default recurses into the children.
  virtual void tensorParallelize(const std::string& prefix,
                                 const std::shared_ptr<TensorParallelGroup>& group,
                                 TensorParallelPlan& plan);
  // True for elementwise activations (a column-parallel layer's output can go
  // through them shard by shard).
  virtual bool isElementwise() const { return false; }

  // Recursive, in registration order (= the order backward finishes them, reversed).
  std::vector<std::pair<std::string, Variable>> namedParameters() const;
  std::vector<Variable> parameters() const;
  // Buffers (e.g. BatchNorm running statistics): saved in checkpoints, not trained.
  std::vector<std::pair<std::string, Tensor*>> namedBuffers();
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

  void train(bool on = true);
  void eval() { train(false); }
  bool isTraining() const { return training_; }
  void zeroGrad();
  int64_t parameterCount() const;
  // Multi-line tree, like printing a torch module.
  std::string summary(int indent = 0) const;

 protected:
  Variable registerParameter(const std::string& name, Tensor value);
  Tensor& registerBuffer(const std::string& name, Tensor value);
  void registerModule(const std::string& name, std::shared_ptr<Module> child);

 private:
  void collectParameters(const std::string& prefix,
                         std::vector<std::pair<std::string, Variable>>& out) const;
  void collectBuffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out);

  std::vector<std::pair<std::string, Variable>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;  // stable addresses
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  bool recompute_ = false;
  ForwardWrapper wrapper_;
};

}  // namespace dtrain::nn
