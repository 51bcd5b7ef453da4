// The default step schedule: gradient accumulation over the step's K
// micro-batches, each forward then backward, as one process trains.
#include <cmath>

#include "parallel/Strategy.h"

namespace dtrain::parallel {

double Strategy::forwardBackward(nn::Module& model, const StepWork& w) {
  const int k = w.microBatches;
  // Each micro-step's loss is a mean over B samples; seeding backward with 1/K
  // makes the accumulated gradient the mean over the K*B samples.
  Tensor seed;
  double sum = 0;
  for (int i = 0; i < k; ++i) {
    beginMicroStep(i, k);
    Tensor x = w.x, y = w.y;
    if (k > 1) {
      x = w.x.slice(0, i * w.microBatchSize, (i + 1) * w.microBatchSize);
      y = w.y.slice(0, i * w.microBatchSize, (i + 1) * w.microBatchSize);
    }
    autograd::Variable loss;
    {
      SpanScope s(w.spans, "forward");
      loss = w.lossFromOutput(model.forward(autograd::Variable(x)), y);
    }
    const float l = loss.item();
    if (!std::isfinite(l)) return l;  // the trainer reports it; no backward through NaN
    SpanScope s(w.spans, "backward");
    if (k > 1) {
      if (!seed.defined()) seed = Tensor::full(loss.shape(), 1.0f / static_cast<float>(k));
      loss.backward(seed);
    } else {
      loss.backward();
    }
    sum += l;
  }
  return sum / k;
}

}  // namespace dtrain::parallel
