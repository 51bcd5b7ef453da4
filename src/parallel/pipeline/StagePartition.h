#pragma once
// How a pipeline cuts the model's layer sequence (nn/LayerSequence.h) into
// stages: by measured time (each layer's forward + backward on one
// micro-batch, balanced so that the slowest stage is as fast as it can be),
// or by hand (--pipeline-split). The plan is printed by the reporter.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/LayerSequence.h"
#include "tensor/Tensor.h"

namespace dtrain::parallel::pipeline {

struct AnalyticLayer {
  double ms = 0;                // forward + backward, one micro-batch
  int64_t activationBytes = 0;  // allocated by the forward and held until backward
  Shape output;                 // output shape for one micro-batch
};

// Runs every layer once to warm up, then twice timed (keeping the faster), on micro-batch `x`.
// Accumulates gradients into the parameters: the caller zeroes them after.
std::vector<AnalyticLayer> profileLayers(const std::vector<nn::SequenceLayer>& layers, const Tensor& x);

// The first layer of each stage (cuts[0] = 0), contiguous, each stage at least
// one layer, minimizing the largest stage cost.
std::vector<int> balancedCuts(const std::vector<double>& cost, int stages);

// Throws UsageError unless `split` (--pipeline-split: the first layers of
// stages 1..P-1, or of model chunks 1..Pv-1) fits `layers` layers; returns the
// cuts with 0 in front. `what` names the flags that set `stages` in the message.
std::vector<int> cutsFromSplit(const std::vector<int>& split, int layers, int stages,
                               const std::string& what = "--pipeline-stages");

// Layer range [cuts[s], cuts[s+1]) of stage s.
inline int stageEnd(const std::vector<int>& cuts, int stage, int layers) {
  return stage + 1 < static_cast<int>(cuts.size()) ? cuts[stage + 1] : layers;
}

// One line per stage (per chunk, with more cuts than `ranks` stages): its
// layers, measured time and activation bytes.
std::string describePlan(const std::vector<nn::SequenceLayer>& layers,
                         const std::vector<AnalyticLayer>& profile, const std::vector<int>& cuts,
                         bool byHand, int ranks);

}  // namespace dtrain::parallel::pipeline
