#include "nn/Layers.h"

#include <sstream>

#include "autograd/Recompute.h"
#include "nn/Init.h"

namespace dtrain::nn {

namespace {
std::string fmt(const char* name, std::initializer_list<int64_t> args) {
  std::ostringstream os;
  os << name << '(';
  size_t i = 0;
  for (int64_t a : args) os << (i++ ? ", " : "") << a;
  os << ')';
  return os.str();
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, Rng& rng, bool withBias) {
  DTRAIN_CHECK(in > 0 && out > 0, "Linear(", in, ", ", out, "): sizes must be positive");
  Tensor w = Tensor::empty({out, in});
  init::torchDefault(w, in, rng);
  weight = registerParameter("weight", w);
  if (withBias) {
    Tensor b = Tensor::empty({out});
    init::torchDefault(b, in, rng);
    bias = registerParameter("bias", b);
  }
}
Variable Linear::forward(const Variable& x) {
  Variable y;
  if (!tensorParallel()) {
    y = autograd::linear(x, weight, bias);
  } else if (rowParallel) {
    y = autograd::reduceFromTensorParallel(autograd::linear(x, weight, Variable()), bias, tp->sum);
  } else {
    y = autograd::linear(autograd::copyToTensorParallel(x, tp->sum), weight, bias);
  }
  if (!loraA) return y;
  // The adapters' rank-r activation h = x A^T is whole and the same on every
  // rank of a tensor-parallel group: row-parallel, A holds this rank's input
  // columns and the partial products are summed (g); column-parallel, A is
  // whole and B holds this rank's output rows, so h's gradient is summed (f).
  Variable h = (*loraA)(x);
  if (tensorParallel())
    h = rowParallel ? autograd::reduceFromTensorParallel(h, Variable(), tp->sum)
                    : autograd::copyToTensorParallel(h, tp->sum);
  return autograd::add(y, autograd::scale((*loraB)(h), loraScale));
}
void Linear::attachLowRank(std::shared_ptr<Linear> a, std::shared_ptr<Linear> b, float scale) {
  DTRAIN_CHECK(!loraA, "Linear: low-rank adapters attached twice");
  loraA = std::move(a);
  loraB = std::move(b);
  loraScale = scale;
  registerModule("lora_A", loraA);
  registerModule("lora_B", loraB);
}
std::string Linear::describe() const { return fmt("Linear", {weight.shape()[1], weight.shape()[0]}); }

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, Rng& rng, int64_t stride_, int64_t padding_,
               bool withBias)
    : stride(stride_), padding(padding_) {
  DTRAIN_CHECK(in > 0 && out > 0 && kernel > 0, "Conv2d(", in, ", ", out, ", ", kernel,
               "): sizes must be positive");
  Tensor w = Tensor::empty({out, in, kernel, kernel});
  init::torchDefault(w, in * kernel * kernel, rng);
  weight = registerParameter("weight", w);
  if (withBias) {
    Tensor b = Tensor::empty({out});
    init::torchDefault(b, in * kernel * kernel, rng);
    bias = registerParameter("bias", b);
  }
}
Variable Conv2d::forward(const Variable& x) {
  return autograd::conv2d(x, weight, bias, stride, padding, output);
}
std::string Conv2d::describe() const {
  auto& s = weight.shape();
  return fmt("Conv2d", {s[1], s[0], s[2], stride, padding});
}

MaxPool2d::MaxPool2d(int64_t k, int64_t s, int64_t p) : kernel(k), stride(s ? s : k), padding(p) {}
Variable MaxPool2d::forward(const Variable& x) { return autograd::maxPool2d(x, kernel, stride, padding); }
std::string MaxPool2d::describe() const { return fmt("MaxPool2d", {kernel, stride, padding}); }

AvgPool2d::AvgPool2d(int64_t k, int64_t s, int64_t p) : kernel(k), stride(s ? s : k), padding(p) {}
Variable AvgPool2d::forward(const Variable& x) { return autograd::avgPool2d(x, kernel, stride, padding); }
std::string AvgPool2d::describe() const { return fmt("AvgPool2d", {kernel, stride, padding}); }

Dropout::Dropout(float p_, uint64_t seed) : p(p_), rng(seed) {
  DTRAIN_CHECK_USAGE(p >= 0.f && p < 1.f, "Dropout probability must be in [0, 1), got ", p);
}
Variable Dropout::forward(const Variable& x) { return autograd::dropout(x, p, isTraining(), rng); }
std::string Dropout::describe() const { return "Dropout(p=" + std::to_string(p) + ")"; }

BatchNorm2d::BatchNorm2d(int64_t channels, float eps_, float momentum_) : eps(eps_), momentum(momentum_) {
  weight = registerParameter("weight", Tensor::full({channels}, 1.f));
  bias = registerParameter("bias", Tensor::zeros({channels}));
  runningMean = &registerBuffer("running_mean", Tensor::zeros({channels}));
  runningVar = &registerBuffer("running_var", Tensor::full({channels}, 1.f));
  numBatchesTracked = &registerBuffer("num_batches_tracked", Tensor::zeros({}, DType::I64));
}
Variable BatchNorm2d::run(const Variable& x, const Variable& residual, bool relu) {
  autograd::BatchNormSpec spec;
  spec.runMean = runningMean;
  spec.runVar = runningVar;
  spec.training = isTraining();
  spec.momentum = momentum;
  spec.eps = eps;
  spec.updateRunning = !autograd::recomputing();
  spec.relu = relu;
  spec.sync = sync;
  if (spec.training && spec.updateRunning) ++*numBatchesTracked->data<int64_t>();
  return autograd::batchNorm2dAct(x, weight, bias, residual, spec);
}
Variable BatchNorm2d::forward(const Variable& x) { return run(x, Variable(), false); }
Variable BatchNorm2d::forwardRelu(const Variable& x) { return run(x, Variable(), true); }
Variable BatchNorm2d::forwardAddRelu(const Variable& x, const Variable& residual) {
  return run(x, residual, true);
}
std::string BatchNorm2d::describe() const { return fmt("BatchNorm2d", {weight.numel()}); }

LayerNorm::LayerNorm(int64_t dim, float eps_) : eps(eps_) {
  weight = registerParameter("weight", Tensor::full({dim}, 1.f));
  bias = registerParameter("bias", Tensor::zeros({dim}));
}
Variable LayerNorm::forward(const Variable& x) { return autograd::layerNorm(x, weight, bias, eps); }
std::string LayerNorm::describe() const { return fmt("LayerNorm", {weight.numel()}); }

Embedding::Embedding(int64_t vocab, int64_t dim, Rng& rng) {
  Tensor w = Tensor::empty({vocab, dim});
  init::normal(w, 0.f, 1.f, rng);
  weight = registerParameter("weight", w);
}
Variable Embedding::forward(const Variable& x) {
  const Tensor& f = x.data();
  Tensor idx = Tensor::empty(f.shape(), DType::I32);
  Tensor c = f.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) idx.data<int32_t>()[i] = static_cast<int32_t>(c.data<float>()[i]);
  return lookup(idx);
}
std::string Embedding::describe() const { return fmt("Embedding", {weight.shape()[0], weight.shape()[1]}); }

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (auto& l : layers) append(std::move(l));
}
void Sequential::append(std::shared_ptr<Module> layer) {
  registerModule(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
}
Variable Sequential::forward(const Variable& x) {
  Variable h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    // ReLU then max pooling equals max pooling then ReLU (ReLU is monotonic and
    // a pooling window's max is one of its inputs), gradients included; pooling
    // first runs the ReLU and its backward on a k*k times smaller tensor.
    if (i + 1 < layers_.size() && dynamic_cast<ReLU*>(layers_[i].get()) &&
        dynamic_cast<MaxPool2d*>(layers_[i + 1].get())) {
      h = autograd::relu((*layers_[i + 1])(h));
      ++i;
      continue;
    }
    h = (*layers_[i])(h);
  }
  return h;
}

}  // namespace dtrain::nn
