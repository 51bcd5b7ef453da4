#pragma once
// Define-by-run autograd. A Variable is a tensor plus, when it requires grad,
// the node that produced it (non-leaf) or an accumulated .grad (leaf). Each op
// records a Node; backward() walks the recorded graph in reverse topological
// order, frees every intermediate as soon as it is no longer needed, and fires
// a leaf's grad-ready hooks the moment its gradient is final (data parallelism
// starts communicating a fusion bucket from there while backward goes on).
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/Tensor.h"

namespace dtrain::autograd {

class Node;
class Variable;

namespace detail {
struct VariableImpl {
  // An op's output is kept by the graph (Node::inputs) only for its gradient;
  // its data is kept while user code holds a Variable of it (`handles`). When
  // the last handle goes, a non-leaf's data is released: a node saves what its
  // backward needs itself (e.g. linear under bf16 keeps bf16 copies only), so
  // activations nothing needs are freed during forward, not after backward.
  Tensor data;
  Shape shape;                   // data's shape, kept when data is released
  MemoryFormat format = MemoryFormat::Plain;  // data's, kept too: the gradient's format
  std::atomic<int> handles{0};   // Variable objects referring to this
  Tensor grad;  // leaf: accumulated gradient; non-leaf: transient during backward
  // zeroGrad() only marks the buffer stale (logically zero): the next backward
  // overwrites it instead of adding, which saves a memset pass per step.
  bool gradStale = false;
  bool requiresGrad = false;
  std::shared_ptr<Node> gradFn;  // null for leaves
  std::vector<std::function<void(Variable&)>> hooks;
  std::string name;
};
}  // namespace detail

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor data, bool requiresGrad = false);
  Variable(const Variable& o) : impl_(o.impl_) { acquire(); }
  Variable(Variable&& o) noexcept : impl_(std::move(o.impl_)) {}
  Variable& operator=(const Variable& o) {
    if (impl_ != o.impl_) {
      drop();
      impl_ = o.impl_;
      acquire();
    }
    return *this;
  }
  Variable& operator=(Variable&& o) noexcept {
    if (this != &o) {
      drop();
      impl_ = std::move(o.impl_);
    }
    return *this;
  }
  ~Variable() { drop(); }

  bool defined() const { return impl_ != nullptr; }
  Tensor& data() { return impl_->data; }
  const Tensor& data() const { return impl_->data; }
  // The accumulated gradient (zeros after zeroGrad(); undefined before any backward).
  Tensor& grad() const;
  const Shape& shape() const { return impl_->shape; }
  int64_t numel() const { return impl_->data.numel(); }
  float item() const { return impl_->data.item(); }

  bool requiresGrad() const { return impl_ && impl_->requiresGrad; }
  void setRequiresGrad(bool r);
  bool isLeaf() const { return !impl_->gradFn; }
  const std::string& name() const { return impl_->name; }
  void setName(std::string n) { impl_->name = std::move(n); }

  // Replaces the data and its shape, leaving .grad alone (tensor parallelism
  // swaps a parameter between its shard and the whole tensor).
  void setData(Tensor data) {
    impl_->shape = data.shape();
    impl_->format = data.format();
    impl_->data = std::move(data);
  }
  // Zeroes .grad, keeping its buffer (grads may be views into a communication
  // bucket); allocates it when there is none yet.
  void zeroGrad();
  // Gives the gradient a buffer of the caller's (e.g. a slice of a fusion bucket).
  void setGradBuffer(Tensor buffer);
  // Registers fn to run when this leaf's gradient is final during a backward.
  void addGradReadyHook(std::function<void(Variable&)> fn);
  void clearHooks() { impl_->hooks.clear(); }

  // Backward from a scalar (seed 1) or with an explicit output gradient.
  void backward();
  void backward(const Tensor& gradOutput);

  // Same data, cut from the graph.
  Variable detach() const { return Variable(impl_->data, false); }

  detail::VariableImpl* impl() const { return impl_.get(); }
  static Variable fromImpl(std::shared_ptr<detail::VariableImpl> impl) {
    return Variable(std::move(impl));
  }
  const std::shared_ptr<detail::VariableImpl>& shared() const { return impl_; }

 private:
  explicit Variable(std::shared_ptr<detail::VariableImpl> impl) : impl_(std::move(impl)) {
    acquire();
  }
  void acquire() {
    if (impl_) impl_->handles.fetch_add(1, std::memory_order_relaxed);
  }
  // The last handle of an op's output releases its data (see VariableImpl).
  void drop() {
    if (impl_ && impl_->handles.fetch_sub(1, std::memory_order_acq_rel) == 1 && impl_->gradFn)
      impl_->data = Tensor();
    impl_.reset();
  }
  friend Variable record(Tensor, std::shared_ptr<Node>, std::initializer_list<const Variable*>);
  std::shared_ptr<detail::VariableImpl> impl_;
};

// Where a node writes the gradient of one input: `ptr` to a dense buffer
// shaped like the input, in the input's MemoryFormat where the node says
// gradientsInInputFormat() (else plain: the engine reorders it);
// accumulate=true means add to it (beta = 1), false means overwrite (beta = 0).
// Writing straight into .grad avoids temporaries.
struct GradTarget {
  float* ptr = nullptr;
  bool accumulate = false;
};

class GradSink {
 public:
  virtual ~GradSink() = default;
  virtual bool needs(size_t input) const = 0;
  virtual GradTarget target(size_t input) = 0;
  // Adds g (shaped like the input) to the input's gradient; may take g's buffer.
  virtual void add(size_t input, Tensor g) = 0;
};

// A recorded operation. Subclasses save what backward needs and release it in
// release(), called by the engine right after backward() runs.
class Node {
 public:
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  virtual void backward(const Tensor& gradOut, GradSink& sink) = 0;
  virtual void release() {}
  // True where backward writes each input's gradient in that input's
  // MemoryFormat (targets and add()ed tensors) and reads gradOut in the
  // output's; false (the default): everything plain, and the engine reorders
  // between the node and inputs that are blocked.
  virtual bool gradientsInInputFormat() const { return false; }

  std::vector<std::shared_ptr<detail::VariableImpl>> inputs;
};

// Grad mode is per thread (ranks of the local backend are threads).
bool gradEnabled();
// Sets grad mode for a scope and restores the previous one.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};
struct NoGradGuard : GradModeGuard {
  NoGradGuard() : GradModeGuard(false) {}
};
// Activation recomputation records the recomputed forward while the engine
// runs backward, which turned grad mode off.
struct EnableGradGuard : GradModeGuard {
  EnableGradGuard() : GradModeGuard(true) {}
};

// True when any input requires grad and grad mode is on: the op must record.
bool needsGraph(std::initializer_list<const Variable*> inputs);
// Wraps `out` as the result of `node`, whose inputs are `inputs`.
Variable record(Tensor out, std::shared_ptr<Node> node, std::initializer_list<const Variable*> inputs);

}  // namespace dtrain::autograd
