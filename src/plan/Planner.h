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

}  // namespace dtrain::plan
