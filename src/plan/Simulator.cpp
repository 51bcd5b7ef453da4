#include "plan/Simulator.h"

#include <algorithm>
#include <cmath>

#include "api/StrategyRegistry.h"
#include "parallel/Mesh.h"
#include "parallel/allreduce/SufficientFactors.h"
#include "parallel/compress/Compressor.h"
#include "plan/Collectives.h"
#include "plan/PipelineSim.h"
#include "runtime/Trainer.h"

namespace dtrain::plan {

namespace {

// The model's weight matrices [rows, cols], as the trainer's buckets hold them:
// each Linear's weight [out, in], each embedding table.
std::vector<std::pair<int64_t, int64_t>> weightMatrices(const ModelProfile& p) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const LayerProfile& layer : p.layers) {
    for (const auto& [in, outs] : layer.linears) out.emplace_back(outs, in);
    for (const auto& [rows, cols] : layer.tables) out.emplace_back(rows, cols);
  }
  return out;
}

// The elements of the matrices PowerSGD factors (parallel/compress/PowerSgd.cpp,
// by its own rule, powerSgdRank); the rest it sends whole.
double powerSgdFactoredParams(const runtime::TrainConfig& c, const ModelProfile& p) {
  const auto o = runtime::compressOptions(c);
  double n = 0;
  for (const auto& [rows, cols] : weightMatrices(p))
    if (parallel::compress::powerSgdRank(rows, cols, o.rank, o.minCompressionRate) > 0)
      n += static_cast<double>(rows) * static_cast<double>(cols);
  return n;
}

// PowerSGD's own work on the communication thread, per step: for each
// factored weight the error feedback (x = g + e), M Q, M^T P and the error
// e = x - P Q^T each stream the matrix through memory (7 passes of 4 bytes; the
// rank-r products are too thin to be compute-bound).
double powerSgdEncodeSeconds(const runtime::TrainConfig& c, const Machine& m, const ModelProfile& p, double share) {
  return 7 * 4 * powerSgdFactoredParams(c, p) / m.memoryBytesPerS * share;
}

}  // namespace

double compressionRatio(const runtime::TrainConfig& c, const ModelProfile& p) {
  if (c.compress == "none") return 1;
  // The model's parameters as one bucket: its matrices, then the rest (biases,
  // norms) as one vector; the compressor's own payload over its fp32 bytes.
  parallel::compress::BucketLayout layout;
  int64_t matrices = 0;
  for (const auto& [rows, cols] : weightMatrices(p)) {
    layout.shapes.push_back({rows, cols});
    matrices += rows * cols;
  }
  if (p.params() > matrices) layout.shapes.push_back({p.params() - matrices});
  const int64_t numel = layout.numel();
  if (numel == 0) return 1;
  const auto bytes = parallel::compress::wireBytes(runtime::compressOptions(c), layout);
  return static_cast<double>(bytes) / (4.0 * static_cast<double>(numel));
}

std::vector<std::pair<int64_t, int64_t>> factorLayers(const ModelProfile& p, const std::string& mode, int64_t rows,
                                                      int dp) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (mode == "off") return out;
  for (const LayerProfile& layer : p.layers)
    for (const auto& [in, outputs] : layer.linears)
      if (mode == "on" || parallel::sfbPays(rows, in, outputs, dp)) out.emplace_back(in, outputs);
  return out;
}

std::string lossyChoice(const runtime::TrainConfig& c) {
  if (c.compress != "none") return "--compress " + c.compress;
  if (c.strategy == "hogwild") return "--strategy hogwild";
  if (c.strategy == "local-sgd") return "--strategy local-sgd";
  if (c.strategy == "ps" && c.consistency != "sync") return "--consistency " + c.consistency;
  return "";
}

namespace {

// ZeRO 3 (parallel/zero): the units forward used last stay gathered into
// backward (as the trainer's bytes_sent_per_worker counts them): the last layer,
// and for a language model the last block and the embedding (lm_head's tied
// weight is used at the end of forward). Per layer, whether backward gathers
// it again.
bool zero3Regathers(const ModelProfile& p, const Layout& l, int layer) {
  if (l.pp > 1) return true;
  const int n = static_cast<int>(p.layers.size());
  if (layer == n - 1) return false;
  return !(p.languageModel && n >= 3 && (layer == n - 2 || layer == 0));
}

// --sfb (parallel/allreduce/SufficientFactors.h): the Linear weights whose B
// factor rows per rank are allgathered instead of their gradient allreduced
// (one allgather per layer, as the trainer does), and the GEMM that rebuilds
// each weight's gradient from all ranks' rows.
struct SufficientFactorCost {
  double weightParams = 0, seconds = 0, bytesPerRank = 0, rebuildS = 0;
};
SufficientFactorCost sufficientFactors(const api::RunConfig& rc, const Machine& m, const ModelProfile& p,
                                       const Layout& l, const RankGroup& g, double computeShare) {
  const auto& c = rc.train;
  SufficientFactorCost out;
  if (l.strategy != "allreduce" || l.dp < 2) return out;
  const int64_t rows = c.batchSize * c.accumulate * p.tokensPerSample;
  for (const auto& [in, outputs] : factorLayers(p, c.sfb, rows, l.dp)) {
    const double msg = 4.0 * static_cast<double>(rows * (in + outputs));
    out.weightParams += static_cast<double>(in * outputs);
    out.seconds += allgatherTime(m, l.placement, g, msg * l.dp);
    out.bytesPerRank += msg * (l.dp - 1);
    out.rebuildS += 2.0 * static_cast<double>(in * outputs) * static_cast<double>(rows * l.dp) /
                    (m.flops(c.precision) / computeShare);
  }
  return out;
}

// Gradient evaluations per L-BFGS iteration: the step's and its line search's
// trials (a line search usually takes one trial beyond the step, sometimes
// more).
constexpr double kSandblasterEvaluationsPerIteration = 2.2;

// The ranks that compute: all but a parameter server's or Sandblaster
// coordinator's, which only add up gradients.
double computingRanks(const Layout& l) {
  return static_cast<double>(l.strategy == "ps" || l.strategy == "sandblaster" ? l.workers : l.ranks);
}

// Whether buckets sent during backward (--overlap) go beside it: not where
// the emulated hosts' ranks keep every shared core computing (the transfers
// wait for cores then: TCP and MPI's progress run on them).
bool coresFreeForOverlap(const Machine& m, const Layout& l) { return m.sharedCores == 0 || l.ranks < m.sharedCores; }

struct StageCompute {
  double forwardS = 0, backwardS = 0, recomputeS = 0;  // one micro-batch through the stage
  double params = 0;                                    // the rank's parameters (its tp slice)
  // The widths per token of its tensor-parallel sums, forward (g) and backward (f).
  std::vector<int64_t> forwardSums, backwardSums;
};

// The machine file's "models" entry for the model: its measured times and
// slowdowns (an empty entry where it has none: no times, every slowdown 1).
const ModelCalibration& modelCalibration(const Machine& m, const std::string& model) {
  static const ModelCalibration none;
  auto it = m.models.find(model);
  return it == m.models.end() ? none : it->second;
}

// One micro-batch of `mbs` samples through each layer, forward and backward,
// on one rank whose rate is shared `share` ways, the layers cut by tensor
// parallelism `tp` ways. Measured (the machine file's "models" entry: the
// layer's own times when calibrate recorded them, the sequence's layers it
// stands for; else its FLOP share of the whole) or FLOPs at the GEMM rate
// plus elementwise bytes at the memory rate, backward twice the forward.
std::vector<std::pair<double, double>> layerTimes(const api::RunConfig& rc, const Machine& m,
                                                  const ModelProfile& p, int64_t mbs, int tp, double share) {
  const auto& c = rc.train;
  const double rate = m.flops(c.precision) / share;
  const double memRate = m.memoryBytesPerS / share;
  const std::optional<ModelTime> t = modelCalibration(m, c.model).at(mbs);
  const double totalFlops = std::max(p.forwardFlops(), 1.0);
  std::vector<std::pair<double, double>> out;
  for (const LayerProfile& layer : p.layers) {
    const double cut = layer.computeCut ? tp : 1;
    double f = 0, b = 0;
    if (t) {
      bool found = false;
      for (const auto& x : t->layers)
        for (const auto& n : layer.sequenceNames)
          if (x.name == n) {
            f += x.forwardS;
            b += x.backwardS;
            found = true;
          }
      const double part = p.layers.size() == 1 ? 1 : layer.forwardFlops / totalFlops;
      if (!found) f = t->forwardS * part, b = t->backwardS * part;
      f *= share / cut;
      b *= share / cut;
    } else {
      const double elementwise = layer.elementwiseBytes + layer.elementwiseBytesCut / cut;
      f = static_cast<double>(mbs) * (layer.forwardFlops / cut / rate + elementwise / memRate);
      b = 2 * f;
    }
    out.emplace_back(f, b);
  }
  return out;
}

std::vector<StageCompute> stageCompute(const api::RunConfig& rc, const Machine& m, const ModelProfile& p,
                                       const Layout& l, double* updateS, double shareOverride,
                                       double* shareUsed, double* threadsUsed) {
  const auto& c = rc.train;
  const bool recompute = c.recompute != "none";
  // Ranks of one host share its cores: their rate divides when they outnumber them.
  // Emulated hosts share one machine's cores: every computing rank of the run
  // (a parameter server's or Sandblaster coordinator's ranks only add up
  // gradients) counts against them.
  const double computing = computingRanks(l);
  // --threads auto: the cores of the host (or of the shared machine) over its ranks.
  const double threads = c.threads > 0 ? c.threads
                         : m.sharedCores > 0 ? std::max(1.0, std::floor(m.sharedCores / computing))
                                             : std::max(1.0, std::floor(static_cast<double>(m.devicesPerHost) /
                                                                        l.placement.ranksPerHost));
  double share = std::max(1.0, static_cast<double>(l.placement.ranksPerHost) * threads / m.devicesPerHost);
  if (m.sharedCores > 0) share = std::max(share, computing * threads / m.sharedCores);
  share = oversubscribedShare(share, modelCalibration(m, c.model).sharedSlowdown);
  if (shareOverride > 0) share = shareOverride;
  *shareUsed = share;
  *threadsUsed = threads;
  const auto times = layerTimes(rc, m, p, l.microBatchSize, l.tp, share);
  std::vector<StageCompute> out(l.pp);
  for (int s = 0; s < l.pp; ++s) {
    StageCompute& sc = out[s];
    for (int i : l.stageLayers[s]) {
      const LayerProfile& layer = p.layers[i];
      const auto [f, b] = times[i];
      sc.forwardS += f;
      sc.backwardS += b;
      if (recompute && layer.recomputeKeptBytes > 0) sc.recomputeS += f;
      sc.params += static_cast<double>(layer.params() - layer.tensorParallelParams) +
                   static_cast<double>(layer.tensorParallelParams) / l.tp;
      const int64_t forwardWidth = layer.forwardSumWidth > 0 ? layer.forwardSumWidth : p.width;
      const int64_t backwardWidth = layer.backwardSumWidth > 0 ? layer.backwardSumWidth : p.width;
      const int backward = layer.tensorParallelBackwardSums >= 0 ? layer.tensorParallelBackwardSums
                                                                 : layer.tensorParallelSums;
      sc.forwardSums.insert(sc.forwardSums.end(), layer.tensorParallelSums, forwardWidth);
      sc.backwardSums.insert(sc.backwardSums.end(), backward, backwardWidth);
    }
    if (s == l.pp - 1 && l.pp > 1) sc.params += static_cast<double>(l.tiedCopy);
  }
  // The measured update counts only for the optimizer it was measured with.
  const std::optional<ModelTime> t = modelCalibration(m, c.model).at(l.microBatchSize);
  const std::string& measuredWith = t ? m.models.at(c.model).optimizer : std::string();
  *updateS = t && (measuredWith.empty() || measuredWith == c.optimizer) ? t->updateS * share : -1;
  return out;
}

}  // namespace

Prediction simulate(const api::RunConfig& rc, const Machine& m, const SimulateOptions& o) {
  return simulate(rc, m, profileFor(rc, &m), o);
}

Prediction simulate(const api::RunConfig& rc, const Machine& m, const ModelProfile& p0,
                    const SimulateOptions& o) {
  const auto& c = rc.train;
  Prediction r;
  // Stages balanced as the trainer balances them: by each layer's time on one micro-batch.
  std::vector<double> cost;
  if (c.pipelineStages > 1)
    for (const auto& [f, b] : layerTimes(rc, m, p0, 1, 1, 1)) cost.push_back(f + b);
  Layout& l = r.layout = layoutFor(rc, p0, o.hosts > 0 ? o.hosts : m.hosts.value_or(1), cost);
  const ModelProfile p = pairedForLayout(p0, l);
  double calibratedUpdate = -1, share = 1, threads = 1;
  const auto stages = stageCompute(rc, m, p, l, &calibratedUpdate, 0, &share, &threads);
  const double act = static_cast<double>(l.microBatchSize * p.tokensPerSample * p.width) * p.elementBytes;
  // Tensor-parallel sums per micro-batch, on the stage's critical path: one
  // allreduce of [tokens, width] each.
  const RankGroup tpGroup = meshGroup(l, MeshDim::Tensor);
  const LinkCost& inter = m.link(LinkKind::InterHost);
  // A micro-batch's activations at another width than the model's (a sum's, a pipeline boundary's).
  auto bytesAtWidth = [&](int64_t width) { return act / static_cast<double>(p.width) * static_cast<double>(width); };
  const bool sumsCrossHosts = tpGroup.hostsSpanned > 1;
  // What a full bucket takes off a sum of this width (none without one).
  // Where the run's ranks outnumber the shared cores, only in pairs: a longer
  // ring's ranks reach its steps one core slice apart and the bucket's burst
  // is lost, while a pair's one exchange each way still finds it full.
  // The cores the run's computing ranks ask for, against an emulated machine's shared ones.
  const double coresAsked = computingRanks(l) * threads;
  const bool ranksFitCores = m.sharedCores == 0 || coresAsked <= m.sharedCores;
  auto sumSaving = [&](int64_t w) {
    return inter.burstBytes > 0 && (ranksFitCores || l.tp == 2)
               ? inter.burstSaving(ringAllreduceBytesPerRank(l.tp, bytesAtWidth(w)))
               : 0.0;
  };
  // Sums within a host where the emulated hosts' ranks outnumber the shared
  // cores: each waits for the partner's core as well (calibrate's paired
  // sums), which costs far more than the sum itself. Sums across hosts have their
  // fits from ranks that shared the cores as they probed. (A pipeline's
  // step-end sums wait it once too: checksS below.)
  const double partnerWait = m.sharedCores > 0 ? m.pairedSumWaitS(coresAsked / m.sharedCores) : 0;
  const double pairWait = sumsCrossHosts ? 0 : partnerWait;
  auto sumsTime = [&](const std::vector<int64_t>& widths, double gap) {
    double t = 0;
    for (int64_t w : widths) {
      double one = allreduceTime(m, l.placement, tpGroup, bytesAtWidth(w), "auto") + pairWait;
      // An emulated link's bucket refills during the compute between two sums
      // and lets that much of the next one through at once.
      if (sumsCrossHosts && inter.burstBytes > 0)
        one = std::max(inter.alphaS, one - std::min(1.0, gap / inter.refillS()) * sumSaving(w));
      t += one;
    }
    return t;
  };
  auto sumsSaving = [&](const std::vector<int64_t>& widths) {
    double t = 0;
    for (int64_t w : widths) t += sumSaving(w);
    return t;
  };
  // Forward (g), backward (f) and, with recomputation, forward again.
  const int forwardPasses = c.recompute != "none" ? 2 : 1;
  std::vector<double> fwd(l.pp), bwd(l.pp), fwdComm(l.pp), bwdComm(l.pp);
  std::vector<double> fwdSum(l.pp), bwdSum(l.pp), fwdSumSaving(l.pp), bwdSumSaving(l.pp);
  double slowest = 0, slowestTp = 0, tpBytes = 0;
  // Bytes a step sends across the emulated hosts' links while ranks compute
  // (their kernels' work then takes cores from the compute: networkCoreS).
  double busyBytes = 0;
  for (int s = 0; s < l.pp; ++s) {
    const StageCompute& st = stages[s];
    const double count = static_cast<double>(st.forwardSums.size() * forwardPasses + st.backwardSums.size());
    const double gap = count > 0 ? (st.forwardS + st.backwardS) / count : 0;
    const double forwardTp = l.tp > 1 ? sumsTime(st.forwardSums, gap) : 0;
    const double backwardTp = l.tp > 1 ? sumsTime(st.backwardSums, gap) + (forwardPasses - 1) * forwardTp : 0;
    fwd[s] = (st.forwardS + forwardTp) / l.v;
    bwd[s] = (st.backwardS + st.recomputeS + backwardTp) / l.v;
    fwdComm[s] = forwardTp / l.v;
    bwdComm[s] = backwardTp / l.v;
    if (l.tp > 1 && sumsCrossHosts) {
      // The same sums as messages on the links, sharing them with the stage's
      // pipeline messages: on a drained link, and what a full bucket takes off.
      const double drained = sumsTime(st.forwardSums, 0);
      fwdSum[s] = drained / l.v;
      bwdSum[s] = (sumsTime(st.backwardSums, 0) + (forwardPasses - 1) * drained) / l.v;
      fwdSumSaving[s] = sumsSaving(st.forwardSums) / l.v;
      bwdSumSaving[s] = (sumsSaving(st.backwardSums) + (forwardPasses - 1) * sumsSaving(st.forwardSums)) / l.v;
    }
    const double compute = st.forwardS + st.backwardS + st.recomputeS;
    if (compute > slowest) slowest = compute, slowestTp = forwardTp + backwardTp;
    double bytes = 0;
    for (int64_t w : st.forwardSums) bytes += forwardPasses * ringAllreduceBytesPerRank(l.tp, bytesAtWidth(w));
    for (int64_t w : st.backwardSums) bytes += ringAllreduceBytesPerRank(l.tp, bytesAtWidth(w));
    if (l.tp > 1) tpBytes = std::max(tpBytes, bytes);
  }
  const double mb = static_cast<double>(l.microBatches);
  r.computeS = mb * slowest;
  double tpExposed = mb * slowestTp, p2pExposed = 0;
  r.bytesPerRank = tpBytes * mb;
  if (l.pp > 1) {
    const RankGroup pipe = meshGroup(l, MeshDim::Pipeline);
    // Chunk k sends its last layer's output (mlp: the Flatten's 784 wide, a
    // hidden layer's 256) to chunk k + 1, and gets its gradient back.
    const int chunks = l.pp * l.v;
    // Each stage's rank: replica 0's, slice 0's (the other replicas' and
    // slices' pipelines cross their hosts' links at the same time: the
    // sharing in p2pTime).
    std::vector<int> stageRank;
    PipelineLinks links;
    for (int s = 0; s < l.pp; ++s) {
      stageRank.push_back(parallel::meshRank({0, s, 0}, {l.dp, l.pp, l.tp}, l.spread));
      links.host.push_back(l.placement.host(stageRank.back()));
    }
    std::vector<double> boundaryBytes;
    for (int k = 0; k + 1 < chunks; ++k) {
      boundaryBytes.push_back(bytesAtWidth(chunkOutputWidth(l, p, k)));
      links.seconds.push_back(p2pTime(m, l.placement, stageRank[k % l.pp], stageRank[(k + 1) % l.pp],
                                      boundaryBytes.back(), pipe.concurrentPerHost));
      links.burstSaving.push_back(inter.burstSaving(boundaryBytes.back()));
    }
    links.refillS = inter.refillS();
    // A stage's tensor-parallel sums across hosts share its host's link with
    // its messages: they do not travel beside them for free.
    if (l.tp > 1 && sumsCrossHosts) {
      links.forwardSumS = fwdSum;
      links.backwardSumS = bwdSum;
      links.forwardSumSaving = fwdSumSaving;
      links.backwardSumSaving = bwdSumSaving;
    }
    // The busiest stage's sends: each chunk's output forward and its input's gradient back.
    double sentBytes = 0;
    for (int s = 0; s < l.pp; ++s) {
      double sent = 0;
      for (int k = s; k < chunks; k += l.pp)
        sent += (k + 1 < chunks ? boundaryBytes[k] : 0) + (k > 0 ? boundaryBytes[k - 1] : 0);
      sentBytes = std::max(sentBytes, sent);
    }
    const int micro = static_cast<int>(l.microBatches);
    // Emulated hosts share the machine's cores: a pipeline's ranks wait in
    // its bubble and while messages travel, and the others then compute
    // faster, so each operation runs at the share of the ranks computing when
    // it starts (its compute from the times alone), not at all ranks' share;
    // the waiting ones still weigh on the cores (Open MPI's yielding wait
    // stays runnable, so the scheduler keeps switching to it).
    PipelineCores cores;
    std::vector<double> pipeFwd = fwd, pipeBwd = bwd;
    std::vector<StageCompute> alone;
    if (m.sharedCores > 0) {
      double unusedUpdate = 0, unusedShare = 0, unusedThreads = 0;
      alone = stageCompute(rc, m, p, l, &unusedUpdate, 1.0, &unusedShare, &unusedThreads);
      for (int s = 0; s < l.pp; ++s) {
        pipeFwd[s] = alone[s].forwardS / l.v + fwdComm[s];
        pipeBwd[s] = (alone[s].backwardS + alone[s].recomputeS) / l.v + bwdComm[s];
      }
      cores.slots = m.sharedCores / threads;
      cores.copies = l.dp * l.tp;
      const ModelCalibration& measured = modelCalibration(m, c.model);
      cores.slowdown = measured.sharedSlowdown;
      cores.waiting = waitingWeight(measured.waitingSlowdown, cores.slowdown);
    }
    cores.forwardCommS = fwdComm;
    cores.backwardCommS = bwdComm;
    const PipelineRun bare = simulatePipeline(c.pipelineSchedule, l.pp, micro, l.v, pipeFwd, pipeBwd, 0.0, false,
                                              false, cores);
    const PipelineRun run =
        simulatePipeline(c.pipelineSchedule, l.pp, micro, l.v, pipeFwd, pipeBwd, links, true, !m.asyncSends, cores);
    if (m.sharedCores > 0) r.computeS = *std::max_element(bare.computeS.begin(), bare.computeS.end());
    r.bubbleS = std::max(0.0, bare.makespan - r.computeS - tpExposed);
    p2pExposed = run.makespan - bare.makespan;
    if (p2pExposed < 0) {
      // The sums on the links found their buckets fuller than the compute
      // between them refills (what the bare run counts): they, and the
      // waits behind them, took less, not the messages.
      const double fromSums = std::min(tpExposed, -p2pExposed);
      tpExposed -= fromSums;
      r.bubbleS = std::max(0.0, r.bubbleS + p2pExposed + fromSums);
      p2pExposed = 0;
    }
    r.bytesPerRank += mb * sentBytes;
    // Every replica's and slice's pipeline sends its own messages while other
    // stages compute, which keep the cores full that part of the step
    // (gpt-small's stages most of it, the mlp's small ones seldom).
    if (m.sharedCores > 0) {
      double coreWork = 0;
      for (const auto& st : alone)
        coreWork += mb * (st.forwardS + st.backwardS + st.recomputeS) * l.dp * l.tp * threads;
      const double full = std::min(1.0, coreWork / (m.sharedCores * run.makespan));
      for (int k = 0; k + 1 < chunks; ++k)
        if (links.host[k % l.pp] != links.host[(k + 1) % l.pp])
          busyBytes += 2 * boundaryBytes[k] * mb * l.dp * l.tp * full;
    }
    for (const auto& op : run.ops) {
      const int rank = parallel::meshRank({0, op.stage, 0}, {l.dp, l.pp, l.tp}, l.spread);
      r.spans.push_back({rank, 0, std::string(op.forward ? "F" : "B") + std::to_string(op.micro), "pipeline",
                         op.start * 1e6, (op.end - op.start) * 1e6});
    }
  }
  // Gradients across replicas (or to the parameter servers).
  double gradParams = 0;
  int gradStage = 0;
  for (int s = 0; s < l.pp; ++s)
    if (stages[s].params > gradParams) gradParams = stages[s].params, gradStage = s;
  const double ratio = compressionRatio(c, p);
  const double gradBytes = 4 * gradParams;
  double dpS = 0, dpExposed = 0;
  const double lastBackward = stages.back().backwardS + stages.back().recomputeS;
  if (l.strategy == "ps") {
    // Every worker pushes its gradient and pulls the parameters; the servers'
    // host link carries all workers' traffic, a worker host's link its workers'.
    const int hostsUsed = l.placement.hosts;
    const int serverHostWorkers = std::max(0, std::min(l.placement.ranksPerHost - l.servers, l.workers));
    const double remoteWorkers = hostsUsed > 1 ? l.workers - serverHostWorkers : 0;
    const LinkCost inter = m.link(LinkKind::InterHost);
    const LinkCost local = m.link(l.placement.threads ? LinkKind::SameProcess : LinkKind::IntraHost);
    const double pushBytes = gradBytes * ratio, pullBytes = gradBytes;
    const double serverSide = remoteWorkers * (pushBytes + pullBytes) / inter.bytesPerS +
                              (l.workers - remoteWorkers) * (pushBytes + pullBytes) / l.servers / local.bytesPerS;
    const double workerSide = hostsUsed > 1 ? l.placement.ranksPerHost * (pushBytes + pullBytes) / inter.bytesPerS
                                            : (pushBytes + pullBytes) / local.bytesPerS;
    const bool async = c.consistency != "sync";
    // Synchronous: the servers' link does not carry the pulls and the next
    // pushes strictly one after the other. The first worker its parameters
    // reach computes and pushes while the others are still pulled (the
    // workers start their steps about one pull apart): one worker's transfer
    // overlaps.
    const double overlap = !async && remoteWorkers > 1 ? std::min(pushBytes, pullBytes) / inter.bytesPerS : 0;
    dpS = 2 * (hostsUsed > 1 ? inter.alphaS : local.alphaS) + std::max(serverSide - overlap, workerSide);
    dpExposed = async ? std::max(0.0, dpS / c.pushEvery - r.computeS) : dpS;
    r.bytesPerRank += pushBytes;
  } else if (l.strategy == "sandblaster") {
    // parallel/sandblaster: per gradient evaluation the coordinator cuts the
    // batch into K units for the W workers (each computes about its share), a
    // worker gets the parameters once per evaluation and answers one gradient
    // per unit; with S shards the parameters come from, and the unit gradients
    // go to, the shards, and the coordinator sends only the samples, or with
    // --sandblaster-data workers (the default) only unit headers: the workers
    // read the samples themselves. L-BFGS's line search evaluates the batch
    // more than once per iteration.
    const double W = l.workers, S = static_cast<double>(c.sandblasterServers);
    const double K = c.workUnits > 0 ? static_cast<double>(c.workUnits) : 4 * W;
    const double evals = kSandblasterEvaluationsPerIteration;
    const double paramBytes = 4.0 * static_cast<double>(p.params());
    // A unit's samples: a language model's input and target windows of int64
    // tokens; a classifier's features, taken as fp32 (raw uint8 images such as
    // Fashion-MNIST's travel as 1 byte each, 4x less).
    const double sampleBytes = p.languageModel ? 2.0 * 8.0 * static_cast<double>(p.tokensPerSample)
                                               : 4.0 * static_cast<double>(p.width);
    const double samples = c.sandblasterData == "workers" ? 0.0 : static_cast<double>(l.samplesPerStep);
    const LinkCost link = m.link(l.placement.threads ? LinkKind::SameProcess
                                 : l.placement.hosts > 1 ? LinkKind::InterHost : LinkKind::IntraHost);
    const double coordinatorOut = samples * sampleBytes + (S > 0 ? 0 : W * paramBytes);
    const double coordinatorIn = S > 0 ? 0 : K * paramBytes;
    const double perShard = S > 0 ? (W + K) * paramBytes / S : 0;
    const double perEval = std::max({coordinatorOut, coordinatorIn, perShard}) / link.bytesPerS + K * link.alphaS;
    dpS = evals * perEval;
    r.computeS *= evals;
    // Units stream: workers compute one while the next is on its way.
    dpExposed = std::max(0.0, dpS - r.computeS);
    r.bytesPerRank += evals * std::max(coordinatorOut, perShard);
  } else if (l.dp > 1 && l.strategy != "hogwild") {
    const RankGroup g = meshGroup(l, MeshDim::Replicas);
    const SufficientFactorCost sfb = sufficientFactors(rc, m, p, l, g, share);
    // Fusion buckets (--fusion-mb) are cut from the fp32 gradients as the
    // trainer cuts them, whole tensors each (the mlp's 0.25 MiB: 267 and 785
    // KiB, not four of 0.25 and the rest); a compressor then shrinks each one
    // by `ratio`. Weights --sfb sends as factors leave their share.
    const double raw = gradBytes - 4 * sfb.weightParams, bytes = raw * ratio;
    std::vector<double> rawBuckets = fusionBuckets(c, l, p, gradStage, gradParams);
    if (rawBuckets.empty()) rawBuckets = {raw};
    for (double& b : rawBuckets) b *= gradBytes > 0 ? raw / gradBytes : 0;
    // Where the hosts' links idled through the step's compute (no tensor sums
    // or pipeline messages on them, no bucket sent during backward: not with
    // --overlap on free cores, not ZeRO's reduce-scatters), netsim's
    // token bucket is full when the sync starts: the first calls' bytes pass
    // at once, up to the bucket (calibrate's fits are calls back to back, the
    // bucket drained), so small syncs such as PowerSGD's few KiB calls would
    // be over-priced without this credit (`dtrain bench allreduce --idle-ms 3`
    // shows the difference).
    const bool linkIdled = l.pp == 1 && !sumsCrossHosts && !(c.overlap && coresFreeForOverlap(m, l)) && c.zero == 0;
    double credit = linkIdled && g.hostsSpanned > 1 && inter.burstBytes > 0
                        ? std::min(1.0, r.computeS / inter.refillS()) * inter.refillS()
                        : 0;
    // A call of `seconds` whose ranks send `sentBytes` each across their hosts'
    // links, no faster than `floor` (its latency): what the bucket takes off.
    auto fromBucket = [&](double seconds, double sentBytes, double floor) {
      const double hostLink = sentBytes * g.perHost * std::max(1, g.concurrentPerHost) / inter.bytesPerS;
      const double saving = std::clamp(std::min(credit, hostLink), 0.0, std::max(0.0, seconds - floor));
      credit -= saving;
      return seconds - saving;
    };
    if (parallel::compress::compressorGathers(c.compress)) {
      dpS = allgatherTime(m, l.placement, g, bytes * l.dp);
      dpS = fromBucket(dpS, reduceScatterBytesPerRank(l.dp, bytes * l.dp), allgatherTime(m, l.placement, g, 4));
      r.bytesPerRank += bytes * (l.dp - 1);
    } else {
      // Each bucket its own call: auto picks each bucket's algorithm by its
      // size. ZeRO reduce-scatters each bucket and allgathers the updated
      // slices (parallel/zero: the collectives' own fits, not the
      // allreduce's); stage 3's forward gathers every unit's parameters and
      // backward gathers them again, except those still whole from the end of
      // forward.
      // ZeRO 3's buckets are its units (fusionBuckets): whether backward
      // gathers each again, and the share of the bytes it gathers again.
      std::vector<bool> regathered;
      if (c.zero == 3)
        for (int i : zero3UnitLayers(l, p, gradStage)) regathered.push_back(zero3Regathers(p, l, i));
      double again = 0, unitsBytes = 0;
      for (size_t i = 0; i < regathered.size() && i < rawBuckets.size(); ++i) {
        unitsBytes += rawBuckets[i];
        if (regathered[i]) again += rawBuckets[i];
      }
      again /= std::max(1.0, unitsBytes);
      auto allreduce = [&](double b) {
        return fromBucket(allreduceTime(m, l.placement, g, b, c.allreduceAlgo), ringAllreduceBytesPerRank(l.dp, b),
                          allreduceTime(m, l.placement, g, 4, c.allreduceAlgo));
      };
      auto perBucket = [&](double b, size_t i) {
        // PowerSGD allreduces each bucket's P, then (orthogonalized) its Q.
        if (c.compress == "powersgd") return allreduce(b / 2) + allreduce(b / 2);
        if (c.zero == 0) return allreduce(b);
        const double gathers = i < regathered.size() && regathered[i] ? 2 : 1;
        return reduceScatterTime(m, l.placement, g, b) + gathers * allgatherTime(m, l.placement, g, b);
      };
      for (size_t i = 0; i < rawBuckets.size(); ++i) dpS += perBucket(rawBuckets[i] * ratio, i);
      r.bytesPerRank += ringAllreduceBytesPerRank(l.dp, bytes) + again * reduceScatterBytesPerRank(l.dp, bytes);
      // The trainer sends a bucket as soon as the last micro-batch's backward
      // fills it (with --overlap, a mesh's replicas too; ZeRO's reduce-scatters
      // always): during that backward, at most what the hosts' links carry in
      // its time (a short backward leaves most buckets to go after it). Of a
      // ring's hops, one a host crosses to the next; every pipeline stage's
      // and tensor slice's replicas sum their own.
      if (g.hostsSpanned > 1 && l.strategy != "local-sgd" && (c.zero > 0 || c.overlap)) {
        const double sent = c.zero > 0 ? reduceScatterBytesPerRank(l.dp, bytes) : ringAllreduceBytesPerRank(l.dp, bytes);
        busyBytes += std::min(sent * g.hostsSpanned * l.pp * l.tp,
                              lastBackward * groupLink(m, l.placement, g).bytesPerS * l.placement.hosts);
      }
    }
    dpS += sfb.seconds;
    if (c.compress == "powersgd") dpS += powerSgdEncodeSeconds(c, m, p, share);
    r.bytesPerRank += sfb.bytesPerRank;
    r.computeS += sfb.rebuildS;
    if (l.strategy == "local-sgd") dpS /= static_cast<double>(std::max<int64_t>(1, c.syncEvery));
    // Overlapped with backward (buckets as gradients are ready), all but the last bucket.
    // Not where the emulated hosts' ranks keep every shared core computing: the
    // transfers then wait for cores (TCP and MPI's progress run on them), so
    // they come after backward instead of beside it.
    // Compressed buckets overlap as well: the trainer compresses and reduces each
    // bucket on its communication thread as backward goes (the encoders'
    // compute, e.g. PowerSGD's orthogonalization, is not modelled).
    const bool overlaps = c.overlap && c.zero == 0 && l.strategy == "allreduce" && coresFreeForOverlap(m, l);
    const double bucket = allreduceTime(m, l.placement, g, rawBuckets.back() * ratio, c.allreduceAlgo);
    dpExposed = overlaps ? std::max(bucket, dpS - lastBackward) : dpS;
  }
  // The update: parameters, gradients and state read, parameters and state written.
  const double opt = optimizerBytesPerParam(c);
  const double updated = gradParams / (c.zero >= 1 && l.strategy != "ps" ? l.dp : 1);
  const double touched = (12 + 2 * opt) * updated;
  r.optimizerS = calibratedUpdate >= 0 ? calibratedUpdate * updated / std::max(1.0, static_cast<double>(p.params()))
                                       : touched / m.memoryBytesPerS;
  if (c.offload != "none") r.optimizerS += 2 * opt * updated / m.memoryBytesPerS;
  if (c.offload == "params") r.optimizerS += 2 * 4 * updated / m.memoryBytesPerS;
  // Between steps every rank of the strategies that combine per step
  // (runtime/Trainer.cpp: anyRankStops, reduceMetric) sums one number over
  // all ranks: whether any was asked to stop (every step) and the loss (every
  // --log-every steps).
  double checksS = 0;
  if (l.ranks > 1 && api::strategyEntry(l.strategy).sumsEveryStep) {
    RankGroup world;
    world.size = l.ranks;
    world.perHost = std::min(l.ranks, l.placement.ranksPerHost);
    world.hostsSpanned = (l.ranks + world.perHost - 1) / world.perHost;
    checksS = (1 + 1.0 / static_cast<double>(std::max<int64_t>(1, c.logEvery))) *
              allreduceTime(m, l.placement, world, 8, "auto");
    // A pipeline's stages end their step apart and first meet in these sums,
    // on full shared cores: a sum after compute waits for its partner's core
    // once (calibrate's paired wait), where data parallelism's ranks arrive
    // together after the gradient sum.
    if (l.pp > 1) checksS += partnerWait;
  }
  // Emulated hosts: the kernels' work for the bytes sent while ranks compute
  // runs on the cores those ranks share, once they keep every core busy
  // (calibrate measures its cost per byte: `core_s_per_byte`); on a slow link
  // a byte keeps the cores busy longer.
  const double networkCoreS = m.sharedCores > 0 && coresAsked >= m.sharedCores
                                  ? inter.coreSPerByte * busyBytes / m.sharedCores
                                  : 0;
  r.exposedCommS = tpExposed + p2pExposed + dpExposed + checksS + networkCoreS;
  r.commS = tpExposed + p2pExposed + dpS + checksS + networkCoreS;
  r.stepS = r.computeS + r.bubbleS + r.exposedCommS + r.optimizerS;
  const double samples = static_cast<double>(l.strategy == "ps" ? c.batchSize * l.workers : l.samplesPerStep);
  r.samplesPerS = samples / r.stepS;
  r.flopsPerStep = samples * (3 * p.forwardFlops());
  for (const auto& layer : p.layers)
    if (c.recompute != "none" && layer.recomputeKeptBytes > 0) r.flopsPerStep += samples * layer.forwardFlops;
  r.memory = predictMemory(rc, l, p);
  // Why: the largest term.
  const std::pair<double, std::string> terms[] = {
      {r.computeS, "compute"},
      {r.bubbleS, "pipeline bubble"},
      {dpExposed, l.strategy == "ps" ? "parameter-server traffic" : "gradient sync"},
      {tpExposed, "tensor-parallel sums"},
      {p2pExposed, "pipeline messages"},
      {r.optimizerS, "optimizer"},
      {checksS, "step-end checks"},
      {networkCoreS, "the network's core time"}};
  for (const auto& [seconds, name] : terms) r.terms.emplace_back(name, seconds);
  const auto* top = std::max_element(std::begin(terms), std::end(terms));
  r.dominant = top->second + " " + std::to_string(static_cast<int>(std::lround(100 * top->first / r.stepS))) + "%";
  return r;
}

}  // namespace dtrain::plan
