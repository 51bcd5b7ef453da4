#include "plan/MemoryModel.h"

#include <algorithm>

#include "api/StrategyRegistry.h"
#include "parallel/Mesh.h"
#include "parallel/allreduce/FusionBuckets.h"
#include "parallel/pipeline/StagePartition.h"
#include "parallel/pipeline/PipelineSchedule.h"
#include "parallel/zero/ZeroDataParallel.h"

namespace dtrain::plan {

double zeroPaperBytes(int stage, double psi, int n, double k) {
  switch (stage) {
    case 0: return (2 + 2 + k) * psi;
    case 1: return 4 * psi + k * psi / n;
    case 2: return 2 * psi + (2 + k) * psi / n;
    default: return (4 + k) * psi / n;
  }
}

double optimizerBytesPerParam(const runtime::TrainConfig& c) {
  const std::string& o = c.optimizer;
  if (o == "adam" || o == "adamw" || o == "lamb") return 8;
  if (o == "sgd" || o == "lars") return c.momentum.value_or(0.9) > 0 ? 4 : 0;
  if (o == "adagrad") return 4;
  return 0;  // lbfgs keeps its history pairs: not modelled
}

namespace {

// Parameters of one stage's slice (tensor parallelism cuts part of them).
double stageParams(const Layout& l, const AnalyticModel& p, int stage) {
  double n = 0;
  for (int i : l.stageLayers[stage]) {
    const auto& layer = p.layers[i];
    const double whole = static_cast<double>(layer.params() - layer.tensorParallelParams);
    n += whole + static_cast<double>(layer.tensorParallelParams) / l.tp;
  }
  if (stage == l.pp - 1 && l.pp > 1) n += static_cast<double>(l.tiedCopy);
  return n;
}

// Activations one micro-batch of one sample leaves on a stage until its
// backward (`held`), and the most its backward holds beyond them
// (`transient`): going from the stage's last layer back, each layer's
// gradient temporaries less what the layers after it have freed (a block's
// first backward holds ~6C values a token more). With recomputation
// a block keeps only its input, and its backward holds the recomputed block
// (plus its temporaries) after the layers above it have freed theirs
// (`recomputing`); the peak is the larger (measured on the trainer).
struct StageActivations {
  double held = 0, transient = 0, recomputing = 0;
};
StageActivations stageActivations(const api::RunConfig& rc, const Layout& l, const AnalyticModel& p,
                                  const std::vector<int>& layers) {
  const bool recompute = rc.train.recompute != "none";
  double kept = 0, whole = 0, biggest = 0, freed = 0, transient = 0;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const auto& layer = p.layers[*it];
    const double full = layer.activationBytes + layer.activationBytesCut / l.tp;
    if (recompute && layer.recomputeKeptBytes > 0) {
      kept += layer.recomputeKeptBytes;
      freed += layer.recomputeKeptBytes;
      biggest = std::max(biggest, full + p.recomputeExtraBytes);
    } else {
      transient = std::max(transient, layer.backwardTransientBytes - freed);
      whole += full;
      freed += full;
    }
  }
  return {kept + whole, transient, kept + biggest};
}

// A pipeline stage's activations category over one step, walked op by op in
// its schedule's order as parallel/pipeline/PipelineParallel.cpp runs it:
//  - every receive of the step is posted at its start (each chunk's input
//    and its output's gradient, per micro-batch) and kept to its end;
//  - a forward holds its micro-batch's activations until its backward (the
//    first chunk's copy of the micro-batch's input is its first layer's
//    kept input, already counted); the output it sends is its last layer's
//    (no copy), which the send keeps to the step's end;
//  - a backward holds its temporaries, or at its end its input's gradient,
//    beside the held micro-batches, then sends that gradient (kept until the
//    step's end) and frees the rest of the micro-batch.
// The peak is where the held micro-batches and the gradients sent so far
// weigh most: GPipe's first backward, 1F1B's last steady forward.
double pipelineActivationsPeak(const api::RunConfig& rc, const Layout& l, const AnalyticModel& p, int stage) {
  namespace pl = parallel::pipeline;
  const int chunks = l.pp * l.v, m = static_cast<int>(l.microBatches);
  const double mbs = static_cast<double>(l.microBatchSize);
  const double perToken = mbs * static_cast<double>(p.tokensPerSample) * p.elementBytes;
  auto inputBytes = [&](int k) { return k > 0 ? perToken * static_cast<double>(chunkOutputWidth(l, p, k - 1)) : 0.0; };
  auto outputBytes = [&](int k) { return k + 1 < chunks ? perToken * static_cast<double>(chunkOutputWidth(l, p, k)) : 0.0; };
  double posted = 0;
  for (int c = 0; c < l.v; ++c) {
    const int k = c * l.pp + stage;
    posted += m * (inputBytes(k) + outputBytes(k));
  }
  const auto ops = pl::stageOps(pl::scheduleFromName(rc.train.pipelineSchedule), stage, l.pp, m, l.v);
  // Each of the stage's chunks: what a micro-batch leaves on it, and what its
  // backward holds beyond that.
  const int inFlight = pl::peakInFlight(ops);
  std::vector<double> held(l.v), momentary(l.v);
  const int layers = static_cast<int>(p.layers.size());
  for (int c = 0; c < l.v; ++c) {
    const int k = c * l.pp + stage;
    std::vector<int> chunk;
    for (int i = l.cuts[k]; i < pl::stageEnd(l.cuts, k, layers); ++i) chunk.push_back(i);
    const StageActivations a = stageActivations(rc, l, p, chunk);
    held[c] = mbs * a.held;
    momentary[c] = mbs * std::max(a.transient, (a.recomputing - a.held) * inFlight / l.v);
  }
  double now = posted, peak = posted;
  for (const pl::PipeOp& op : ops) {
    const int k = op.chunk * l.pp + stage;
    if (op.forward) {
      now += held[op.chunk];
      peak = std::max(peak, now);
    } else {
      peak = std::max(peak, now + std::max(momentary[op.chunk], inputBytes(k)));
      now += inputBytes(k) + outputBytes(k) - held[op.chunk];
    }
  }
  return peak;
}

// Rank 0's timing of every layer on one micro-batch before a pipeline's
// first step (parallel/pipeline/StagePartition.cpp's profileLayers): layer by
// layer, a forward from the previous layer's output, then a backward from a
// seed of its output's shape, whose parameter gradients stay until all are
// timed. Its peak, beside the whole model's parameters: the gradients so far
// and one layer's input, activations, seed and backward temporaries.
double layerTimingPeak(const Layout& l, const AnalyticModel& p) {
  const double mbs = static_cast<double>(l.microBatchSize);
  const double tokens = static_cast<double>(p.tokensPerSample);
  double input = p.languageModel ? 8.0 * tokens : 4.0 * static_cast<double>(p.width);  // per sample
  double gradients = 0, peak = 0;
  for (const AnalyticLayer& layer : p.layers) {
    gradients += 4.0 * static_cast<double>(layer.params());
    const double output = tokens * static_cast<double>(layer.outputWidth > 0 ? layer.outputWidth : p.width) * 4.0;
    const double perSample = input + layer.activationBytes + layer.activationBytesCut + output +
                             std::max(layer.backwardTransientBytes, output);
    peak = std::max(peak, gradients + mbs * perSample);
    input = output;
  }
  return peak;
}

}  // namespace

std::vector<int> zero3UnitLayers(const Layout& l, const AnalyticModel& p, int stage) {
  std::vector<int> out;
  for (auto it = l.stageLayers[stage].rbegin(); it != l.stageLayers[stage].rend(); ++it)
    if (p.layers[*it].params() > 0) out.push_back(*it);
  return out;
}

std::vector<double> fusionBuckets(const runtime::TrainConfig& c, const Layout& l, const AnalyticModel& p, int stage,
                                  double psi) {
  std::vector<double> tensors;
  for (int i : l.stageLayers[stage])
    for (int64_t n : p.layers[i].tensors) tensors.push_back(4.0 * static_cast<double>(n));
  double total = 0;
  for (double t : tensors) total += t;
  if (tensors.empty() || total <= 0) return {};
  const double scale = 4 * psi / total;  // the stage's bytes to psi parameters' bytes
  if (c.zero == 3) {
    // ZeRO 3's buckets are the model's units, not --fusion-mb's: gpt-small's
    // 4 blocks of 793 KB, not 13 buckets of 257 KiB.
    std::vector<double> units;
    for (int i : zero3UnitLayers(l, p, stage)) units.push_back(4.0 * static_cast<double>(p.layers[i].params()) * scale);
    return units;
  }
  std::reverse(tensors.begin(), tensors.end());
  for (double& t : tensors) t *= scale;
  const std::vector<size_t> starts = parallel::fusionBucketStarts(tensors, std::max(1.0, c.fusionMb * 1048576.0));
  std::vector<double> buckets(starts.size(), 0.0);
  for (size_t b = 0, i = 0; i < tensors.size(); ++i) {
    if (b + 1 < starts.size() && i == starts[b + 1]) ++b;
    buckets[b] += tensors[i];
  }
  return buckets;
}

std::optional<KnownDataset> knownDataset(const std::string& name) {
  if (name == "fashion-mnist") return KnownDataset{60000, 10000, 28 * 28};
  return std::nullopt;
}

std::vector<RankMemory> predictMemory(const api::RunConfig& rc, const Layout& l, const AnalyticModel& p) {
  const auto& c = rc.train;
  const double opt = optimizerBytesPerParam(c);
  std::vector<RankMemory> out;
  const int meshRanks = l.dp * l.pp * l.tp;
  const bool ps = l.cost->hasServers;
  for (int r = 0; r < l.ranks; ++r) {
    RankMemory m;
    if (ps && r < l.servers) {
      // A server holds its shard of the parameters, of the optimizer's state and
      // the gradient the workers' pushes are summed into (parallel/ps/Server.cpp).
      const double shard = static_cast<double>(p.params()) / l.servers;
      m.parameters = 4 * shard;
      m.gradients = 4 * shard;
      m.optimizerState = opt * shard;
      m.peak = m.modelStates();
      out.push_back(m);
      continue;
    }
    const int stage = ps || r >= meshRanks ? 0 : parallel::meshCoord(r, {l.dp, l.pp, l.tp}, l.spread).stage;
    const double psi = stageParams(l, p, stage);
    const int n = l.dp;
    const int zero = ps ? 0 : c.zero;
    m.parameters = 4 * psi / (zero >= 3 ? n : 1);
    m.gradients = 4 * psi / (zero >= 2 ? n : 1);
    // A parameter server's workers leave the optimizer to the servers.
    m.optimizerState = ps ? 0 : opt * psi / (zero >= 1 ? n : 1);
    if (c.offload == "optimizer" || c.offload == "params") std::swap(m.offloaded, m.optimizerState);
    if (c.offload == "params") {
      m.offloaded += m.parameters;
      m.parameters = 0;
    }
    // A pipeline stage's micro-batches come and go in its schedule's order;
    // without one, a step holds one micro-batch.
    if (l.pp > 1) {
      m.activationsPeak = pipelineActivationsPeak(rc, l, p, stage);
    } else {
      const StageActivations perSample = stageActivations(rc, l, p, l.stageLayers[stage]);
      m.activationsPeak = static_cast<double>(l.microBatchSize) *
                          std::max(perSample.held + perSample.transient, perSample.recomputing);
    }
    // The peak: the states and the larger of the activations (end of
    // forward) and what the step's collectives hold for a moment (around the
    // update), measured on the trainer: ZeRO 1 a gradient shard, ZeRO 2 the
    // full gradient (during backward, with the activations), ZeRO 3 the
    // gathered parameters with the activations, or gathered parameters and
    // gradients at the update.
    const double whole = 4 * psi;
    double extra = m.activationsPeak;
    if (zero == 1) extra = std::max(m.activationsPeak, whole / n);
    if (zero == 3) extra = std::max(m.activationsPeak + whole, 2 * whole + whole / (2.0 * n));
    // Compressors with error feedback keep each bucket's residual, a gradient's
    // worth (parallel/compress: top-k, random-k, 1-bit, signSGD, PowerSGD).
    const std::string& k = c.compress;
    const bool feedback = k == "topk" || k == "randomk" || k == "onebit" || k == "signsgd" || k == "powersgd";
    if (feedback && n > 1 && !ps) extra += whole;
    if (zero == 1 || zero == 2) {
      // ZeRO 1 and 2 (parallel/zero/ZeroDataParallel.cpp) move the
      // parameters into a flat buffer per fusion bucket at set-up, while the
      // buckets' full gradients exist: the largest bucket is held twice.
      const std::vector<double> buckets = fusionBuckets(c, l, p, stage, psi);
      double largest = 0, ahead = 0;
      for (size_t b = 0; b < buckets.size(); ++b) {
        largest = std::max(largest, buckets[b]);
        if (b <= parallel::zero::kBucketsAhead) ahead += buckets[b];  // the one backward fills, and those ahead
      }
      m.peak = std::max(m.peak, 2 * whole + largest);
      if (zero == 2) {
        // ZeRO 2 keeps a full gradient only for the buckets backward is
        // filling (kBucketsAhead ahead of the one it is in), but the first step starts
        // with all of them (set-up's) and without the optimizer's state (the
        // first update makes it).
        const double noState = m.modelStates() - m.optimizerState;
        extra = m.activationsPeak + ahead;
        m.peak = std::max(m.peak, noState + whole + m.activationsPeak + 2048);
      }
    }
    m.peak = std::max(m.peak, m.modelStates() + extra + 2048);
    if (l.pp > 1) {
      // A pipeline builds the whole model on every rank before each stage
      // keeps its own layers, and rank 0 first times every layer on one
      // micro-batch (parallel/pipeline/PipelinePlan.cpp).
      const double all = 4.0 * static_cast<double>(p.params());
      m.peak = std::max(m.peak, all + 2048);
      if (r == 0) m.peak = std::max(m.peak, all + layerTimingPeak(l, p) + 2048);
    }
    // The dataset a process loads for its rank (the trainer counts it in the
    // peak, not in a category): Fashion-MNIST's training set is 180 MiB on
    // every worker, its test set 30 more on the reporting one, the first.
    // Local ranks, threads of one process, share one copy loaded outside them.
    const bool ownData = c.backend == "mpi" || api::strategyEntry(l.strategy).oneProcess;
    if (const auto data = knownDataset(c.dataset); data && ownData) {
      const bool reporter = r == (ps ? l.servers : 0);
      m.peak += data->bytes(data->trainSamples) + (reporter ? data->bytes(data->testSamples) : 0);
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace dtrain::plan
