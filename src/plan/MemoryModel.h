#pragma once
// Memory per rank, two ways:
//  - ZeRO's formulas (Rajbhandari et al. 2020, Figure 1): mixed-precision
//    Adam keeps 2 bytes of fp16 parameters, 2 of fp16 gradients and K = 12 of
//    fp32 master weights, momentum and variance per parameter (Psi):
//    baseline (2 + 2 + K) Psi, stage 1 4 Psi + K Psi / N, stage 2
//    2 Psi + (2 + K) Psi / N, stage 3 (4 + K) Psi / N.
//  - dtrain's own categories as the trainer reports them in memory_per_rank
//    (fp32 parameters and gradients, the optimizer's fp32 state), per rank of
//    the configuration's layout, with activations from the model profile.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/RunConfig.h"
#include "plan/Layout.h"
#include "plan/AnalyticModel.h"

namespace dtrain::plan {

double zeroPaperBytes(int stage, double params, int ranks, double k = 12);

struct RankMemory {
  double parameters = 0, gradients = 0, optimizerState = 0, activationsPeak = 0, peak = 0,
         offloaded = 0;
  double modelStates() const { return parameters + gradients + optimizerState; }
};

// fp32 optimizer state bytes per parameter (sgd with momentum 4, adam 8...).
double optimizerBytesPerParam(const runtime::TrainConfig& c);

// ZeRO 3's units (parallel/zero/ZeroStage3.cpp: each block's own parameters,
// last block first): a stage's layers holding parameters, last first. (A
// weight two blocks share, gpt's tied embedding, is a unit of its own there;
// here it stays with the first.)
std::vector<int> zero3UnitLayers(const Layout& l, const AnalyticModel& p, int stage);

// A pipeline stage's fusion buckets' bytes in launch order, grouped by the
// trainer's rule (parallel::fusionBucketStarts) from the stage's parameter
// tensors in reverse order, scaled to `psi` parameters (a tensor-parallel
// rank's slice: the cut spread evenly over the tensors); ZeRO 3's, one per
// unit. The gradient sync's time (Simulator.cpp) and ZeRO's set-up peak
// (here) both follow them.
std::vector<double> fusionBuckets(const runtime::TrainConfig& c, const Layout& l, const AnalyticModel& p, int stage,
                                  double psi);

// A built-in dataset the trainer holds in memory (every worker its training
// set, the reporting worker the test set too, fp32 samples and int32 labels):
// Fashion-MNIST. Generated (`synthetic`), text and user datasets: none known.
struct KnownDataset {
  int64_t trainSamples = 0, testSamples = 0, sampleNumel = 0;
  double bytes(int64_t samples) const { return 4.0 * static_cast<double>(samples) * static_cast<double>(sampleNumel + 1); }
};
std::optional<KnownDataset> knownDataset(const std::string& name);

// One entry per rank, in rank order.
std::vector<RankMemory> predictMemory(const api::RunConfig& rc, const Layout& l, const AnalyticModel& p);

}  // namespace dtrain::plan
