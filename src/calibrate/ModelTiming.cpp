#include "calibrate/ModelTiming.h"

#include <chrono>
#include <set>
#include <thread>

#include "autograd/Ops.h"
#include "calibrate/Fit.h"
#include "core/Error.h"
#include "core/Memory.h"
#include "core/Rng.h"
#include "core/Timer.h"
#include "nn/LayerSequence.h"
#include "nn/ModelRegistry.h"
#include "optim/Factory.h"
#include "runtime/Task.h"
#include "runtime/Trainer.h"

namespace dtrain::calibrate {

using autograd::Variable;

namespace {

// Random inputs and labels of one micro-batch: images of the default data
// shape for classifiers, byte tokens for language models.
std::pair<Tensor, Tensor> randomBatch(const nn::ModelInfo& info, int64_t batch) {
  Rng rng(11);
  if (info.task == nn::kLanguageModelTask) {
    Tensor x = Tensor::empty({batch, info.blockSize}, DType::I32);
    Tensor y = Tensor::empty({batch, info.blockSize}, DType::I32);
    for (int64_t i = 0; i < batch * info.blockSize; ++i) {
      x.data<int32_t>()[i] = static_cast<int32_t>(rng.below(info.vocab));
      y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(info.vocab));
    }
    return {x, y};
  }
  const nn::DataShape shape;
  Shape xs{batch};
  xs.insert(xs.end(), shape.sample.begin(), shape.sample.end());
  Tensor x = Tensor::empty(xs, DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform();
  Tensor y = Tensor::empty({batch}, DType::I32);
  for (int64_t i = 0; i < batch; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(shape.classes));
  return {x, y};
}

void sleepUntilEpoch(double s) {
  const double wait = s - epochSeconds();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
}

struct StepTimes {
  std::vector<double> forward, backward, held;
  double update = 0;
};

// One training step, layer by layer as a pipeline runs it: each layer's input
// is a leaf, so each layer's backward can be timed on its own (layer i's
// backward starts from the gradient layer i+1 left on its input).
StepTimes timedStep(const std::vector<nn::SequenceLayer>& layers, const Tensor& x, const Tensor& y,
                    optim::Optimizer& opt) {
  const size_t n = layers.size();
  StepTimes s;
  s.forward.resize(n);
  s.backward.resize(n);
  s.held.resize(n);
  opt.zeroGrad();
  std::vector<Variable> inputs, outputs;
  Tensor in = x;
  for (size_t i = 0; i < n; ++i) {
    inputs.emplace_back(in, i > 0);
    const int64_t before = memory::stats().currentBytes;
    Timer t;
    outputs.push_back(layers[i].forward(inputs.back()));
    s.forward[i] = t.seconds();
    s.held[i] = static_cast<double>(memory::stats().currentBytes - before);
    in = outputs.back().data();
  }
  Timer t;
  Variable loss = autograd::crossEntropy(outputs.back(), y);
  s.forward[n - 1] += t.seconds();
  t.reset();
  loss.backward();
  s.backward[n - 1] = t.seconds();
  for (size_t i = n - 1; i-- > 0;) {
    if (!outputs[i].requiresGrad()) continue;  // e.g. mlp's Flatten of the input: nothing to do
    t.reset();
    outputs[i].backward(inputs[i + 1].grad());
    s.backward[i] = t.seconds();
  }
  t.reset();
  opt.step();
  s.update = t.seconds();
  return s;
}

}  // namespace

ModelTimes medianOfPasses(const std::vector<ModelTimes>& passes) {
  DTRAIN_CHECK(!passes.empty(), "calibrate: no passes to take the median of");
  ModelTimes out = passes.front();
  auto across = [&](auto time) {
    std::vector<double> v;
    for (const ModelTimes& p : passes) v.push_back(time(p));
    return median(v);
  };
  out.forwardS = across([](const ModelTimes& p) { return p.forwardS; });
  out.backwardS = across([](const ModelTimes& p) { return p.backwardS; });
  out.updateS = across([](const ModelTimes& p) { return p.updateS; });
  for (size_t i = 0; i < out.layers.size(); ++i) {
    for (const ModelTimes& p : passes)
      DTRAIN_CHECK(p.layers.size() == out.layers.size() && p.layers[i].name == out.layers[i].name,
                   "calibrate: passes over different layers");
    out.layers[i].forwardS = across([i](const ModelTimes& p) { return p.layers[i].forwardS; });
    out.layers[i].backwardS = across([i](const ModelTimes& p) { return p.layers[i].backwardS; });
    out.layers[i].activationBytes = static_cast<int64_t>(
        across([i](const ModelTimes& p) { return static_cast<double>(p.layers[i].activationBytes); }));
  }
  return out;
}

ModelTimes profileModel(const ModelTimingConfig& c) {
  runtime::TrainConfig train;
  train.model = c.model;
  const nn::ModelInfo info = nn::modelInfo(c.model);
  runtime::applyTaskDefaults(train, [](const char*) { return false; });
  auto model = nn::buildModel(c.model, {}, 1);
  // A model that is not a sequence of layers (resnet's residual blocks, a
  // user's graph) is timed whole, as one layer: what the simulator needs for
  // data parallelism, ZeRO and the rest; a pipeline cannot cut it anyway.
  const auto layers = nn::isLayerSequence(*model)
                          ? nn::layerSequence(*model)
                          : std::vector<nn::SequenceLayer>{
                                {"model", [m = model.get()](const Variable& x) { return (*m)(x); }, {{"", model}}}};
  auto opt = optim::makeOptimizer(train.optimizer, model->namedParameters(),
                                  runtime::optimizerOptions(train));
  const auto [x, y] = randomBatch(info, c.microBatch);

  ModelTimes out;
  out.optimizer = train.optimizer;
  out.params = model->parameterCount();
  std::set<const nn::Module*> counted;
  for (const auto& layer : layers) {
    LayerTimes lt;
    lt.name = layer.name;
    for (const auto& [name, module] : layer.modules)
      if (counted.insert(module.get()).second) lt.params += module->parameterCount();
    out.layers.push_back(lt);
  }
  const size_t n = layers.size();
  std::vector<std::vector<double>> fwd(n), bwd(n), held(n);
  std::vector<double> totalF, totalB, update;
  Timer timed;
  for (int step = 0;; ++step) {
    const int done = step - c.warmup;  // timed steps so far
    const bool windowOpen = c.windowEndS > 0 && epochSeconds() < c.windowEndS;
    if (done >= c.repeats && !windowOpen && (timed.seconds() >= c.minSeconds || done >= 4 * c.repeats)) break;
    if (done == 0 && c.windowStartS > 0) {
      sleepUntilEpoch(c.windowStartS);
      timed.reset();
    }
    StepTimes s = timedStep(layers, x, y, *opt);
    if (step < c.warmup) {
      timed.reset();
      continue;
    }
    double f = 0, b = 0;
    for (size_t i = 0; i < n; ++i) {
      fwd[i].push_back(s.forward[i]);
      bwd[i].push_back(s.backward[i]);
      held[i].push_back(s.held[i]);
      f += s.forward[i];
      b += s.backward[i];
    }
    totalF.push_back(f);
    totalB.push_back(b);
    update.push_back(s.update);
  }
  out.wallStepS = timed.seconds() / static_cast<double>(std::max<size_t>(1, totalF.size()));
  out.forwardS = median(totalF);
  out.backwardS = median(totalB);
  out.updateS = median(update);
  for (size_t i = 0; i < n; ++i) {
    out.layers[i].forwardS = median(fwd[i]);
    out.layers[i].backwardS = median(bwd[i]);
    out.layers[i].activationBytes = static_cast<int64_t>(std::max(0.0, median(held[i])));
  }
  return out;
}

}  // namespace dtrain::calibrate
