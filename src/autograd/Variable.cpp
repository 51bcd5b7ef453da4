#include "autograd/Variable.h"

#include <cstring>
#include <unordered_map>

#include "tensor/cpu/Elementwise.h"

namespace dtrain::autograd {

namespace {
thread_local bool tGradEnabled = true;
}

bool gradEnabled() { return tGradEnabled; }
GradModeGuard::GradModeGuard(bool enabled) : prev_(tGradEnabled) { tGradEnabled = enabled; }
GradModeGuard::~GradModeGuard() { tGradEnabled = prev_; }

Variable::Variable(Tensor data, bool requiresGrad)
    : impl_(std::make_shared<detail::VariableImpl>()) {
  impl_->shape = data.shape();
  impl_->format = data.format();
  impl_->data = std::move(data);
  acquire();
  setRequiresGrad(requiresGrad);
}

void Variable::setRequiresGrad(bool r) {
  DTRAIN_CHECK(!r || impl_->data.dtype() == DType::F32,
               "only f32 tensors can require grad (got ", dtypeName(impl_->data.dtype()), ")");
  impl_->requiresGrad = r;
}

void Variable::zeroGrad() {
  if (impl_->grad.defined())
    impl_->gradStale = true;
  else {
    memory::CategoryScope accounted(memory::Category::Gradients);
    impl_->grad = Tensor::zeros(impl_->shape);
  }
}

Tensor& Variable::grad() const {
  if (impl_->gradStale) {
    impl_->grad.zero();
    impl_->gradStale = false;
  }
  return impl_->grad;
}

void Variable::setGradBuffer(Tensor buffer) {
  DTRAIN_CHECK(buffer.shape() == shape() && buffer.isContiguous(), "setGradBuffer: buffer ",
               shapeStr(buffer.shape()), " for a parameter of shape ", shapeStr(shape()));
  // No temporary zeros: a gradient-sized allocation here would sit beside the
  // new buffer (ZeRO-2 allocates its buckets during backward).
  if (grad().defined()) buffer.copyFrom(grad());
  else buffer.zero();
  impl_->grad = std::move(buffer);
  impl_->gradStale = false;
}

void Variable::addGradReadyHook(std::function<void(Variable&)> fn) {
  DTRAIN_CHECK(isLeaf(), "grad-ready hooks can only be set on leaf variables");
  impl_->hooks.push_back(std::move(fn));
}

bool needsGraph(std::initializer_list<const Variable*> inputs) {
  if (!tGradEnabled) return false;
  for (const Variable* v : inputs)
    if (v && v->defined() && v->requiresGrad()) return true;
  return false;
}

Variable record(Tensor out, std::shared_ptr<Node> node,
                std::initializer_list<const Variable*> inputs) {
  auto impl = std::make_shared<detail::VariableImpl>();
  impl->shape = out.shape();
  impl->format = out.format();
  impl->data = std::move(out);
  impl->requiresGrad = true;
  for (const Variable* v : inputs)
    node->inputs.push_back(v && v->defined() && v->requiresGrad() ? v->shared() : nullptr);
  impl->gradFn = std::move(node);
  return Variable(std::move(impl));
}

}  // namespace dtrain::autograd
