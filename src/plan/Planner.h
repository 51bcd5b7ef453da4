#pragma once
// `dtrain plan`: every configuration of a model on H hosts x R ranks that the
// trainer accepts (strategy, dp x pp x tp mesh and placement, micro-batches
// and schedule, ZeRO stage, offload, recomputation, compression, parameter
// servers), predicted on the machine, pruned by memory and ranked by samples/s.
#include <cstdint>
#include <string>
#include <vector>

#include "api/RunConfig.h"
#include "api/Schema.h"
#include "plan/Machine.h"
#include "plan/Simulator.h"

namespace dtrain::plan {

struct PlanRequest {
  std::string model;
  int64_t globalBatch = 0;
  int hosts = 1, ranksPerHost = 1;
  double memoryPerRank = 0;  // bytes; 0: the machine file's memory per device
  bool allowLossy = false;
  api::RunConfig base;       // the options every candidate starts from (defaults)
  api::Sources baseSources;  // where base's options were given (a --config file)
};

struct Candidate {
  api::RunConfig config;     // prepared: what `dtrain train --config` runs
  Prediction prediction;
  std::string summary;       // "allreduce dp 8, zero 1"
  std::string lossy;         // "" or the lossy choice
  double peakBytes = 0;      // the largest rank's predicted peak
  bool fits = true;
};

struct PlanResult {
  std::vector<Candidate> ranked;  // fitting candidates, fastest first (lossy ones included)
  int64_t enumerated = 0, rejected = 0, tooBig = 0;
  double seconds = 0;
};

PlanResult plan(const PlanRequest& r, const Machine& m);

// --global-batch auto: the largest global batch (the ranks times a power of
// two, doubled from one sample per rank; at most kMaxAutoBatch)
// for which some configuration fits the memory per rank in one pass per step
// (no accumulation or pipeline micro-batches: with them any batch fits, in
// more, smaller micro-batches), and the options
// that go with it (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): the
// linear scaling rule, lr x global batch / the base's batch_size (the batch
// the base lr was set for), and a gradual warmup from the base lr over the
// first 5 epochs where the dataset's size is known (synthetic, fashion-mnist),
// else over kAutoWarmupSteps.
inline constexpr int64_t kMaxAutoBatch = 1 << 16;
inline constexpr int64_t kAutoWarmupSteps = 100;
struct AutoBatch {
  int64_t globalBatch = 0;  // 0: not even one sample per rank fits
  int64_t referenceBatch = 0;
  double baseLr = 0, lr = 0;
  int64_t warmupSteps = 0;
  bool warmupFromEpochs = false;  // 5 epochs of a known dataset (else kAutoWarmupSteps)
  int plans = 0;                  // searches run
  PlanResult result;              // the search at globalBatch
};
AutoBatch autoGlobalBatch(const PlanRequest& r, const Machine& m);

}  // namespace dtrain::plan
