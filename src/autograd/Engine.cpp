// The backward engine: reverse topological traversal of the recorded graph.
#include <unordered_map>
#include <vector>

#include "autograd/Variable.h"
#include "tensor/cpu/Elementwise.h"

namespace dtrain::autograd {
namespace {

using Impl = detail::VariableImpl;
using ImplPtr = std::shared_ptr<Impl>;

void accumulate(Impl& in, Tensor t, const char* opName) {
  DTRAIN_CHECK(t.shape() == in.shape, "backward of ", opName, ": gradient shape ",
               shapeStr(t.shape()), " does not match input shape ", shapeStr(in.shape));
  t = t.toFormat(in.format);  // a gradient is in its variable's format
  Tensor& g = in.grad;
  if (in.gradStale) {  // logically zero: overwrite, keeping the buffer
    g.copyFrom(t);
    in.gradStale = false;
    return;
  }
  if (!g.defined()) {
    // Take the buffer when nobody else holds it; a gradient must be owned.
    bool exclusive = (t.isContiguous() || t.blocked()) && t.storage().use_count() == 1;
    g = exclusive ? std::move(t) : t.clone();
    return;
  }
  Tensor src = t.blocked() ? t : t.contiguous();
  kernels::add(g.data<float>(), src.data<float>(), g.data<float>(), g.numel());
}

// Gradient sink for one node: routes each input's gradient into its .grad.
// A node that writes plain gradients gets plain temporaries for its blocked
// inputs, reordered into their gradients by finish().
class EngineSink final : public GradSink {
 public:
  explicit EngineSink(Node& node) : node_(node) {}
  bool needs(size_t i) const override { return i < node_.inputs.size() && node_.inputs[i]; }

  GradTarget target(size_t i) override {
    Impl* in = node_.inputs[i].get();
    if (in->format != MemoryFormat::Plain && !node_.gradientsInInputFormat()) {
      reordered_.emplace_back(i, Tensor::empty(in->shape));
      return {reordered_.back().second.data<float>(), false};
    }
    Tensor& g = in->grad;
    if (in->gradStale) {
      in->gradStale = false;
      return {g.data<float>(), false};
    }
    if (g.defined()) return {g.data<float>(), true};
    g = Tensor::emptyIn(in->shape, in->format);
    return {g.data<float>(), false};
  }

  void add(size_t i, Tensor t) override { accumulate(*node_.inputs[i], std::move(t), node_.name()); }

  void finish() {
    for (auto& [i, t] : reordered_) accumulate(*node_.inputs[i], std::move(t), node_.name());
    reordered_.clear();
  }

 private:
  Node& node_;
  std::vector<std::pair<size_t, Tensor>> reordered_;
};

void fireHooks(const ImplPtr& leaf) {
  if (leaf->hooks.empty()) return;
  Variable handle = Variable::fromImpl(leaf);
  for (auto& h : leaf->hooks) h(handle);
}

}  // namespace

void Variable::backward() {
  DTRAIN_CHECK(defined() && numel() == 1, "backward() without a gradient needs a scalar, got shape ",
               shapeStr(shape()));
  backward(Tensor::full(shape(), 1.0f));
}

void Variable::backward(const Tensor& gradOutput) {
  DTRAIN_CHECK(requiresGrad(), "backward on a variable that does not require grad");
  DTRAIN_CHECK(gradOutput.shape() == shape(), "backward: gradient shape ",
               shapeStr(gradOutput.shape()), " != output shape ", shapeStr(shape()));
  NoGradGuard noGrad;  // backward itself records nothing
  if (isLeaf()) {
    accumulate(*impl_, gradOutput.clone(), "backward");
    fireHooks(impl_);
    return;
  }

  // Topological order (iterative DFS) and, for each variable, how many recorded
  // edges point at it: its gradient is final once all of them have run.
  std::vector<ImplPtr> order;
  std::unordered_map<Impl*, int> pending;
  std::vector<std::pair<ImplPtr, size_t>> stack;
  stack.push_back({impl_, 0});
  pending[impl_.get()] = 0;
  while (!stack.empty()) {
    auto& [v, next] = stack.back();
    Node* fn = v->gradFn.get();
    if (fn && next < fn->inputs.size()) {
      const ImplPtr& in = fn->inputs[next++];
      if (!in) continue;
      auto [it, fresh] = pending.try_emplace(in.get(), 0);
      ++it->second;
      if (fresh) stack.push_back({in, 0});
      continue;
    }
    order.push_back(std::move(v));
    stack.pop_back();
  }

  impl_->grad = gradOutput.contiguous().clone().toFormat(impl_->format);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    ImplPtr v = std::move(*it);  // dropped at the end of this iteration
    std::shared_ptr<Node> fn = std::move(v->gradFn);
    if (!fn) continue;  // leaves: hooks fire when their last consumer has run
    Tensor g = std::move(v->grad);
    v->grad = Tensor();
    if (g.defined()) {
      EngineSink sink(*fn);
      fn->backward(fn->gradientsInInputFormat() ? g : g.contiguous(), sink);
      sink.finish();
    }
    g = Tensor();
    fn->release();
    for (const ImplPtr& in : fn->inputs)
      if (in && --pending[in.get()] == 0 && !in->gradFn) fireHooks(in);
  }
}

}  // namespace dtrain::autograd
