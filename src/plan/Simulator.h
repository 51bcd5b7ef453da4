#pragma once
// The cost model: a configuration's predicted step on a machine, split into
// compute, exposed communication, pipeline bubble and optimizer, with memory
// and bytes per rank (docs/guide/planning.md).
//   compute    per micro-batch and stage: forward FLOPs / the GEMM rate (or the
//              machine file's measured times), backward 2x, one more forward
//              with recomputation; ranks sharing a host's cores share its rate.
//   bubble     (p - 1) / v micro-batch times (GPipe, 1F1B; interleaved v > 1).
//   comm       the gradient allreduce (ring or hierarchical, alpha-beta;
//              ZeRO 1-2 reduce-scatter + allgather, ZeRO 3 gathering again in backward),
//              hidden behind backward except its last bucket when overlapped;
//              Megatron's tensor-parallel sums (2 per block forward, 2
//              backward, 2 more when recomputing); pipeline activations and
//              their gradients point to point; parameter servers' push and
//              pull through the servers' links; compression's bytes.
//   optimizer  the update's bytes over memory bandwidth (offload: the state
//              read and written once more).
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/RunConfig.h"
#include "plan/Layout.h"
#include "plan/Machine.h"
#include "plan/MemoryModel.h"
#include "plan/AnalyticModel.h"

namespace dtrain::plan {

// One predicted span of the timeline (microseconds), on rank `rank`'s lane.
struct PredictedSpan {
  int rank = 0;
  int lane = 0;  // 0 compute, 1 comm (runtime/Timeline.h's lanes)
  std::string name, category;
  double startUs = 0, durUs = 0;
};

struct Prediction {
  Layout layout;
  double stepS = 0, computeS = 0, exposedCommS = 0, bubbleS = 0, optimizerS = 0;
  double commS = 0;            // all communication, hidden or not
  double samplesPerS = 0;
  double bytesPerRank = 0;     // sent per step by the busiest rank
  double flopsPerStep = 0;     // the model's FLOPs per step, all ranks (recomputation included)
  std::vector<RankMemory> memory;
  std::string dominant;        // the largest term, in words ("why")
  // Every term of the step, in words and seconds (the exposed communication's
  // parts each on its own): compute, pipeline bubble, gradient sync, ...
  std::vector<std::pair<std::string, double>> terms;
  std::vector<PredictedSpan> spans;
};

struct SimulateOptions {
  int hosts = 0;  // backend mpi: hosts the ranks spread over (0: the machine file's, else 1)
};

// `rc` prepared (api::prepared). The profile: profileFor(rc) unless given.
Prediction simulate(const api::RunConfig& rc, const Machine& m, const SimulateOptions& o = {});
Prediction simulate(const api::RunConfig& rc, const Machine& m, const AnalyticModel& profile,
                    const SimulateOptions& o = {});

// The result line: samples_per_s, step_s, its split, memory_per_rank (the
// trainer's categories), bytes_per_rank.
nlohmann::json predictionJson(const Prediction& p);

// Choices that change what is learned (compression, asynchrony, Hogwild!,
// local SGD): "" when the configuration has none, else which.
std::string lossyChoice(const runtime::TrainConfig& c);

}  // namespace dtrain::plan
