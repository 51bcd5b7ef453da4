#include "plan/Layout.h"

#include <algorithm>
#include <map>
#include <set>

#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "parallel/Mesh.h"
#include "parallel/pipeline/StagePartition.h"

namespace dtrain::plan {

Layout layoutFor(const api::RunConfig& rc, const AnalyticModel& profile, int hosts,
                 const std::vector<double>& layerCost) {
  const auto& c = rc.train;
  Layout l;
  l.strategy = api::resolveStrategy(c);
  // Every prediction (simulate, plan, train --machine) starts here: a strategy
  // without a cost model is refused, not predicted as something else.
  l.cost = &strategyCost(l.strategy);
  const api::StrategyEntry& entry = api::strategyEntry(l.strategy);
  l.ranks = entry.worldSize ? entry.worldSize(c) : c.workers;
  l.pp = c.pipelineStages;
  l.tp = c.tensorParallel;
  l.v = l.pp > 1 ? c.virtualStages : 1;
  l.spread = c.placement == "spread";
  // A parameter server's or Sandblaster's workers are its replicas (those
  // strategies run no pipeline or tensor slices).
  l.dp = std::max(1, c.workers / (l.pp * l.tp));
  l.workers = c.workers;
  if (l.cost->hasServers) l.servers = c.servers;
  l.microBatches = l.pp > 1 ? c.microBatches : c.accumulate;
  l.microBatchSize = l.pp > 1 ? std::max<int64_t>(1, c.batchSize / c.microBatches) : c.batchSize;
  l.samplesPerStep = c.batchSize * l.dp * (l.pp > 1 ? 1 : c.accumulate);
  // Placement: threads of one process (local), or mpirun's by-core mapping over the hosts.
  l.placement.threads = c.backend != "mpi";
  l.placement.hosts = l.placement.threads ? 1 : std::max(1, hosts);
  l.placement.ranksPerHost = std::max(1, (l.ranks + l.placement.hosts - 1) / l.placement.hosts);
  // Stages: the layers cut into pp x v chunks; stage s runs chunks s, s + pp, ...
  const int n = static_cast<int>(profile.layers.size());
  const int chunks = std::min(l.pp * l.v, n);
  std::vector<double> cost = layerCost;
  if (cost.size() != profile.layers.size()) {
    cost.clear();
    for (const auto& layer : profile.layers) cost.push_back(std::max(layer.forwardFlops, 1.0));
  }
  bool sequence = true;  // the profile's layers are the model's layer sequence, one to one
  for (const auto& layer : profile.layers) sequence = sequence && layer.sequenceNames.size() == 1;
  const std::vector<int>& cuts = l.cuts = !c.pipelineSplit.empty() && sequence && l.pp > 1
                                    ? parallel::pipeline::cutsFromSplit(c.pipelineSplit, n, chunks)
                                    : parallel::pipeline::balancedCuts(cost, chunks);
  l.stageLayers.assign(l.pp, {});
  for (int k = 0; k < static_cast<int>(cuts.size()); ++k)
    for (int layer = cuts[k]; layer < parallel::pipeline::stageEnd(cuts, k, n); ++layer)
      l.stageLayers[k % l.pp].push_back(layer);
  // A tied lm_head on another stage than the embedding keeps its own copy.
  if (l.pp > 1 && profile.languageModel && !profile.layers.empty() && !profile.layers[0].tensors.empty())
    l.tiedCopy = profile.layers[0].tensors[0];
  return l;
}

AnalyticModel pairedForLayout(const AnalyticModel& p, const Layout& l) {
  AnalyticModel out = p;
  const int n = static_cast<int>(p.layers.size());
  // Layers up to the first with parameters read the model's input: no one
  // needs its gradient.
  int firstWithParams = 0;
  while (firstWithParams < n && p.layers[firstWithParams].params() == 0) ++firstWithParams;
  for (int k = 0; k < static_cast<int>(l.cuts.size()); ++k) {
    const int end = parallel::pipeline::stageEnd(l.cuts, k, n);
    for (int i = l.cuts[k]; i + 2 < end; ++i) {
      AnalyticLayer &col = out.layers[i], &act = out.layers[i + 1], &row = out.layers[i + 2];
      if (!col.sequenceLinear || !act.sequenceActivation || !row.sequenceLinear) continue;
      const bool readsInput = i <= firstWithParams;
      col.tensorParallelParams = col.params();
      col.tensorParallelSums = 0;
      col.tensorParallelBackwardSums = readsInput ? 0 : 1;
      col.backwardSumWidth = col.inputWidth;
      // The column-parallel Linear keeps its output slice for backward; the
      // activation after it holds a whole-width tensor (the mlp's first
      // layers keep 768 + 256 / T floats a sample at tensor parallelism T).
      col.activationBytesCut += col.activationBytes;
      col.activationBytes = 0;
      row.tensorParallelParams = row.tensors.empty() ? 0 : row.tensors[0];  // the weight; the bias stays whole
      row.tensorParallelSums = 1;
      row.tensorParallelBackwardSums = 0;
      row.forwardSumWidth = row.outputWidth;
      col.computeCut = act.computeCut = row.computeCut = true;
      i += 2;
    }
  }
  // Sequence layers left unpaired: whole, no sums.
  for (AnalyticLayer& layer : out.layers)
    if ((layer.sequenceLinear || layer.sequenceActivation) && !layer.computeCut) {
      layer.tensorParallelParams = 0;
      layer.tensorParallelSums = 0;
      layer.tensorParallelBackwardSums = 0;
    }
  return out;
}

int64_t chunkOutputWidth(const Layout& l, const AnalyticModel& p, int k) {
  const int layers = static_cast<int>(p.layers.size());
  const int last = (k + 1 < static_cast<int>(l.cuts.size()) ? l.cuts[k + 1] : layers) - 1;
  return last >= 0 && last < layers && p.layers[last].outputWidth > 0 ? p.layers[last].outputWidth : p.width;
}

RankGroup meshGroup(const Layout& l, MeshDim dim) {
  const parallel::MeshShape shape{l.dp, l.pp, l.tp};
  const int size = dim == MeshDim::Replicas ? l.dp : dim == MeshDim::Pipeline ? l.pp : l.tp;
  RankGroup g;
  g.size = size;
  if (size <= 1) return g;
  // Each group's key is the rank's coordinates without the dimension's own.
  auto key = [&](int rank) {
    parallel::MeshCoord c = parallel::meshCoord(rank, shape, l.spread);
    if (dim == MeshDim::Replicas) c.replica = 0;
    if (dim == MeshDim::Pipeline) c.stage = 0;
    if (dim == MeshDim::Tensor) c.slice = 0;
    return parallel::meshRank(c, shape, l.spread);
  };
  const int world = l.dp * l.pp * l.tp;
  std::map<int, std::set<int>> hostsOf;  // group -> hosts
  for (int r = 0; r < world; ++r) hostsOf[key(r)].insert(l.placement.host(r));
  const auto& mine = hostsOf[key(0)];
  g.hostsSpanned = static_cast<int>(mine.size());
  g.perHost = std::max(1, size / g.hostsSpanned);
  // Groups that cross host 0's link (rank 0's host) at the same time.
  int crossing = 0;
  for (const auto& [k, hosts] : hostsOf)
    if (hosts.size() > 1 && hosts.count(0)) ++crossing;
  g.concurrentPerHost = std::max(1, crossing);
  return g;
}

}  // namespace dtrain::plan
