#pragma once
// A strategy's cost model: what the simulator must know of a strategy beyond
// its mesh. How its ranks divide into computing replicas and servers, what
// synchronising its gradients costs a step, what it changes in what is
// learned. One entry per strategy (StrategyCosts.cpp), resolved once when a
// configuration's layout is made (Layout::cost): the simulator asks the entry,
// it never compares strategy names.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "api/RunConfig.h"
#include "plan/AnalyticModel.h"
#include "plan/LossyCosts.h"
#include "plan/Machine.h"

namespace dtrain::plan {

struct Layout;

// What a strategy's gradient sync sees of the step.
struct SyncContext {
  const api::RunConfig& rc;
  const Machine& m;
  const AnalyticModel& p;
  const Layout& l;
  double gradParams = 0;        // the parameters of the largest stage (its tensor-parallel slice)
  int gradStage = 0;            // that stage
  double lastBackward = 0;      // the last stage's backward (and recomputation) of one micro-batch
  double computeShare = 1;      // how many ways a rank's compute rate is shared
  bool sumsCrossHosts = false;  // tensor-parallel sums cross the hosts' links
};

// The step as far as the gradient sync: a sync gets it with seconds and
// exposedS 0 and returns it with its own part added to each.
struct SyncCost {
  double seconds = 0;       // the sync's communication, hidden or not
  double exposedS = 0;      // what the step waits for of it
  double computeS = 0;      // the step's compute (Sandblaster's evaluations, SFB's rebuild in it)
  double bytesPerRank = 0;  // sent by the busiest rank
  double busyBytes = 0;     // sent across emulated hosts' links while ranks compute
};

struct StrategyCost {
  // The step's gradient sync, added to the step so far.
  std::function<SyncCost(const SyncContext&, SyncCost step)> sync;
  // The sync's name among the step's terms.
  std::string syncTerm = "gradient sync";
  // Ranks beyond its workers only add up gradients (parameter servers, a
  // Sandblaster coordinator): they do not compute.
  bool workersOnlyCompute = false;
  // Its servers hold the parameters and the optimizer: a worker's step counts
  // its own batch, and the workers keep no optimizer state.
  bool hasServers = false;
  // What it changes in what is learned ("--strategy hogwild"), "" where nothing.
  std::function<std::string(const runtime::TrainConfig&)> lossy = [](const runtime::TrainConfig&) { return ""; };
  // That choice's price in accuracy where PERFORMANCE.md measured it.
  MeasuredCost measured;
};

// Throws UsageError for a strategy that has no cost model.
const StrategyCost& strategyCost(const std::string& strategy);

// The gradient syncs the entries share.
SyncCost noSync(const SyncContext& x, SyncCost step);
struct AllreduceSyncOptions {
  bool sufficientFactors = false;  // --sfb may send Linear gradients as factors
  bool overlapsBackward = false;   // --overlap sends buckets during backward
  bool periodic = false;           // one sync every --sync-every steps (local SGD)
};
SyncCost allreduceSync(const SyncContext& x, SyncCost step, const AllreduceSyncOptions& o);
SyncCost parameterServerSync(const SyncContext& x, SyncCost step);
SyncCost sandblasterSync(const SyncContext& x, SyncCost step);
SyncCost gossipSync(const SyncContext& x, SyncCost step);

// Shown by the planner too: the bytes a gradient compressor sends for the
// model's fp32 gradients, as a fraction (1 = none): the compressor's own
// payload (compress::wireBytes) for a bucket of the profile's weight matrices
// and its other parameters.
double compressionRatio(const runtime::TrainConfig& c, const AnalyticModel& p);
// The (in, out) Linear weights whose gradient --sfb `mode` sends as factors of
// `rows` rows per rank over `dp` replicas (on: all; auto: where they pay,
// parallel::sfbPays; off: none).
std::vector<std::pair<int64_t, int64_t>> factorLayers(const AnalyticModel& p, const std::string& mode, int64_t rows,
                                                      int dp);

}  // namespace dtrain::plan
