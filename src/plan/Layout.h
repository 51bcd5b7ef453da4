#pragma once
// How a prepared configuration lays the model out on its ranks: the strategy,
// the mesh (dp x pp x tp, pack or spread), the pipeline's stages and
// micro-batches, and the parameter servers; what the cost model and the
// memory model read instead of the raw options.
#include <cstdint>
#include <string>
#include <vector>

#include "api/RunConfig.h"
#include "plan/Collectives.h"
#include "plan/AnalyticModel.h"
#include "plan/costs/StrategyCost.h"

namespace dtrain::plan {

struct Layout {
  std::string strategy;
  const StrategyCost* cost = nullptr;  // the strategy's cost model
  int ranks = 1;
  int dp = 1, pp = 1, tp = 1, v = 1;  // v: model chunks per stage (interleaved 1F1B)
  bool spread = false;
  int64_t microBatches = 1;     // per optimizer step (pipeline micro-batches or accumulate)
  int64_t microBatchSize = 1;   // samples
  int64_t samplesPerStep = 1;   // the global batch
  int servers = 0, workers = 1; // ps
  // Layers of each stage (its v chunks together), indices into the profile;
  // the first layer of each chunk (chunk k on stage k % pp).
  std::vector<std::vector<int>> stageLayers;
  std::vector<int> cuts;
  // Elements the last stage holds twice (the tied embedding of lm_head).
  int64_t tiedCopy = 0;
  Placement placement;
};

// `hosts`: the hosts a backend mpi run spreads over (local: one). The stages
// are cut as the trainer cuts them (parallel/pipeline/StagePartition.h): by hand
// (--pipeline-split, where the profile's layers are the model's sequence), or
// balanced by each layer's forward + backward time, `layerCost` (empty: FLOPs).
Layout layoutFor(const api::RunConfig& rc, const AnalyticModel& profile, int hosts,
                 const std::vector<double>& layerCost = {});

// The width per token of what pipeline chunk k sends on (its last layer's
// output: mlp's Flatten 784, a hidden layer 256; the model's width where the
// profile does not say).
int64_t chunkOutputWidth(const Layout& l, const AnalyticModel& p, int k);

// The profile with its layer sequence's tensor-parallel pairs made as the
// trainer makes them (nn/TensorParallelLayers.h), within each pipeline chunk's run
// of layers: Linear -> activation -> Linear becomes a column-parallel Linear
// (its parameters cut, one backward sum f of its input, none where it reads
// the model's input) and a row-parallel one (its weight cut, one forward sum
// g of its output); a Linear without a partner in its chunk stays whole (mlp
// cut after its first Linear: stage 0 runs whole on every tensor-parallel rank).
AnalyticModel pairedForLayout(const AnalyticModel& p, const Layout& l);

// The group of `rank`'s mesh neighbours along one dimension and how many such
// groups cross a host's link at once.
enum class MeshDim { Replicas, Pipeline, Tensor };
RankGroup meshGroup(const Layout& l, MeshDim dim);

}  // namespace dtrain::plan
