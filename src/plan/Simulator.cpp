#include "plan/Simulator.h"

#include <algorithm>
#include <cmath>

#include "api/StrategyRegistry.h"
#include "parallel/Mesh.h"
#include "plan/Collectives.h"
#include "plan/PipelineSim.h"

namespace dtrain::plan {

std::string lossyChoice(const runtime::TrainConfig& c) {
  if (c.compress != "none") return "--compress " + c.compress;
  return strategyCost(api::resolveStrategy(c)).lossy(c);
}

namespace {

// The ranks that compute: all but a parameter server's or Sandblaster
// coordinator's, which only add up gradients.
double computingRanks(const Layout& l) { return static_cast<double>(l.cost->workersOnlyCompute ? l.workers : l.ranks); }

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
                                                  const AnalyticModel& p, int64_t mbs, int tp, double share) {
  const auto& c = rc.train;
  const double rate = m.flops(c.precision) / share;
  const double memRate = m.memoryBytesPerS / share;
  const std::optional<ModelTime> t = modelCalibration(m, c.model).at(mbs);
  const double totalFlops = std::max(p.forwardFlops(), 1.0);
  std::vector<std::pair<double, double>> out;
  for (const AnalyticLayer& layer : p.layers) {
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

std::vector<StageCompute> stageCompute(const api::RunConfig& rc, const Machine& m, const AnalyticModel& p,
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
      const AnalyticLayer& layer = p.layers[i];
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

// The step as its phases build it: what one phase leaves for the next.
struct Step {
  const api::RunConfig& rc;
  const Machine& m;
  const Layout& l;
  AnalyticModel p;  // paired as the layout cuts it (pairedForLayout)
  std::vector<StageCompute> stages;
  double calibratedUpdate = -1, share = 1, threads = 1;
  double act = 0;  // one micro-batch's activations at the model's width, bytes
  RankGroup tpGroup;
  bool sumsCrossHosts = false;
  double coresAsked = 0;   // the cores the run's computing ranks ask for
  double partnerWait = 0;  // a sum's wait for its partner's core on oversubscribed shared cores
  // Per stage, one micro-batch (over the chunks v): forward and backward with
  // their tensor-parallel sums, the sums alone, the sums as link messages on a
  // drained link and what a full bucket takes off them.
  std::vector<double> fwd, bwd, fwdComm, bwdComm, fwdSum, bwdSum, fwdSumSaving, bwdSumSaving;
  double tpExposed = 0, p2pExposed = 0;
  // Bytes a step sends across the emulated hosts' links while ranks compute
  // (their kernels' work then takes cores from the compute: networkCoreS).
  double busyBytes = 0;

  // A micro-batch's activations at another width than the model's (a sum's, a pipeline boundary's).
  double bytesAtWidth(int64_t width) const { return act / static_cast<double>(p.width) * static_cast<double>(width); }
};

// Each stage's compute and its tensor-parallel sums, one allreduce of
// [tokens, width] each, on the stage's critical path.
void tensorSums(Step& st, Prediction& r) {
  const auto& c = st.rc.train;
  const Layout& l = st.l;
  const Machine& m = st.m;
  const LinkCost& inter = m.link(LinkKind::InterHost);
  const bool ranksFitCores = m.sharedCores == 0 || st.coresAsked <= m.sharedCores;
  // What a full bucket takes off a sum of this width (none without one).
  // Where the run's ranks outnumber the shared cores, only in pairs: a longer
  // ring's ranks reach its steps one core slice apart and the bucket's burst
  // is lost, while a pair's one exchange each way still finds it.
  auto sumSaving = [&](int64_t w) {
    return inter.burstBytes > 0 && (ranksFitCores || l.tp == 2)
               ? inter.burstSaving(ringAllreduceBytesPerRank(l.tp, st.bytesAtWidth(w)))
               : 0.0;
  };
  // Sums within a host where the emulated hosts' ranks outnumber the shared
  // cores: each waits for the partner's core as well (calibrate's paired
  // sums). Sums across hosts have their fits from ranks that shared the cores
  // as they probed. (A pipeline's step-end sums wait it once too: stepEndChecks.)
  const double pairWait = st.sumsCrossHosts ? 0 : st.partnerWait;
  auto sumsTime = [&](const std::vector<int64_t>& widths, double gap) {
    double t = 0;
    for (int64_t w : widths) {
      double one = allreduceTime(m, l.placement, st.tpGroup, st.bytesAtWidth(w), "auto") + pairWait;
      // An emulated link's bucket refills during the compute between two sums
      // and lets that much of the next one through at once.
      if (st.sumsCrossHosts && inter.burstBytes > 0)
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
  for (auto* v : {&st.fwd, &st.bwd, &st.fwdComm, &st.bwdComm, &st.fwdSum, &st.bwdSum, &st.fwdSumSaving,
                  &st.bwdSumSaving})
    v->assign(l.pp, 0.0);
  double slowest = 0, slowestTp = 0, tpBytes = 0;
  for (int s = 0; s < l.pp; ++s) {
    const StageCompute& sc = st.stages[s];
    const double count = static_cast<double>(sc.forwardSums.size() * forwardPasses + sc.backwardSums.size());
    const double gap = count > 0 ? (sc.forwardS + sc.backwardS) / count : 0;
    const double forwardTp = l.tp > 1 ? sumsTime(sc.forwardSums, gap) : 0;
    const double backwardTp = l.tp > 1 ? sumsTime(sc.backwardSums, gap) + (forwardPasses - 1) * forwardTp : 0;
    st.fwd[s] = (sc.forwardS + forwardTp) / l.v;
    st.bwd[s] = (sc.backwardS + sc.recomputeS + backwardTp) / l.v;
    st.fwdComm[s] = forwardTp / l.v;
    st.bwdComm[s] = backwardTp / l.v;
    if (l.tp > 1 && st.sumsCrossHosts) {
      // The same sums as messages on the links, sharing them with the stage's
      // pipeline messages: on a drained link, and what a full bucket takes off.
      const double drained = sumsTime(sc.forwardSums, 0);
      st.fwdSum[s] = drained / l.v;
      st.bwdSum[s] = (sumsTime(sc.backwardSums, 0) + (forwardPasses - 1) * drained) / l.v;
      st.fwdSumSaving[s] = sumsSaving(sc.forwardSums) / l.v;
      st.bwdSumSaving[s] = (sumsSaving(sc.backwardSums) + (forwardPasses - 1) * sumsSaving(sc.forwardSums)) / l.v;
    }
    const double compute = sc.forwardS + sc.backwardS + sc.recomputeS;
    if (compute > slowest) slowest = compute, slowestTp = forwardTp + backwardTp;
    double bytes = 0;
    for (int64_t w : sc.forwardSums) bytes += forwardPasses * ringAllreduceBytesPerRank(l.tp, st.bytesAtWidth(w));
    for (int64_t w : sc.backwardSums) bytes += ringAllreduceBytesPerRank(l.tp, st.bytesAtWidth(w));
    if (l.tp > 1) tpBytes = std::max(tpBytes, bytes);
  }
  const double mb = static_cast<double>(l.microBatches);
  r.computeS = mb * slowest;
  st.tpExposed = mb * slowestTp;
  r.bytesPerRank = tpBytes * mb;
}

// The messages between a pipeline's chunks on their links: each chunk k sends
// its last layer's output to chunk k + 1 and gets its gradient back. Each
// stage's rank is replica 0's, slice 0's (the other replicas' and slices'
// pipelines cross their hosts' links at the same time: the sharing in
// p2pTime). Returns the bytes at each boundary.
std::vector<double> pipelineLinks(const Step& st, std::vector<int>& stageRank, PipelineLinks& links) {
  const Layout& l = st.l;
  const LinkCost& inter = st.m.link(LinkKind::InterHost);
  const RankGroup pipe = meshGroup(l, MeshDim::Pipeline);
  const int chunks = l.pp * l.v;
  for (int s = 0; s < l.pp; ++s) {
    stageRank.push_back(parallel::meshRank({0, s, 0}, {l.dp, l.pp, l.tp}, l.spread));
    links.host.push_back(l.placement.host(stageRank.back()));
  }
  std::vector<double> boundaryBytes;
  for (int k = 0; k + 1 < chunks; ++k) {
    boundaryBytes.push_back(st.bytesAtWidth(chunkOutputWidth(l, st.p, k)));
    links.seconds.push_back(p2pTime(st.m, l.placement, stageRank[k % l.pp], stageRank[(k + 1) % l.pp],
                                    boundaryBytes.back(), pipe.concurrentPerHost));
    links.burstSaving.push_back(inter.burstSaving(boundaryBytes.back()));
  }
  links.refillS = inter.refillS();
  // A stage's tensor-parallel sums across hosts share its host's link with its messages.
  if (l.tp > 1 && st.sumsCrossHosts) {
    links.forwardSumS = st.fwdSum;
    links.backwardSumS = st.bwdSum;
    links.forwardSumSaving = st.fwdSumSaving;
    links.backwardSumSaving = st.bwdSumSaving;
  }
  return boundaryBytes;
}

// Emulated hosts share the machine's cores: a pipeline's ranks wait in its
// bubble and while messages travel, and the others then compute faster, so
// each operation runs at the share of the ranks computing when it starts (its
// compute from the times alone), not at all ranks' share; the waiting ones
// still weigh on the cores (Open MPI's yielding wait stays runnable).
PipelineCores pipelineCores(const Step& st, std::vector<double>& pipeFwd, std::vector<double>& pipeBwd,
                            std::vector<StageCompute>& alone) {
  const Layout& l = st.l;
  PipelineCores cores;
  if (st.m.sharedCores > 0) {
    double unusedUpdate = 0, unusedShare = 0, unusedThreads = 0;
    alone = stageCompute(st.rc, st.m, st.p, l, &unusedUpdate, 1.0, &unusedShare, &unusedThreads);
    for (int s = 0; s < l.pp; ++s) {
      pipeFwd[s] = alone[s].forwardS / l.v + st.fwdComm[s];
      pipeBwd[s] = (alone[s].backwardS + alone[s].recomputeS) / l.v + st.bwdComm[s];
    }
    cores.slots = st.m.sharedCores / st.threads;
    cores.copies = l.dp * l.tp;
    const ModelCalibration& measured = modelCalibration(st.m, st.rc.train.model);
    cores.slowdown = measured.sharedSlowdown;
    cores.waiting = waitingWeight(measured.waitingSlowdown, cores.slowdown);
  }
  cores.forwardCommS = st.fwdComm;
  cores.backwardCommS = st.bwdComm;
  return cores;
}

// A pipeline's schedule over its micro-batches: the bubble, the messages'
// exposed time and the busiest stage's bytes.
void pipelinePhase(Step& st, Prediction& r) {
  const Layout& l = st.l;
  const Machine& m = st.m;
  const auto& c = st.rc.train;
  std::vector<int> stageRank;
  PipelineLinks links;
  const std::vector<double> boundaryBytes = pipelineLinks(st, stageRank, links);
  const int chunks = l.pp * l.v;
  // The busiest stage's sends: each chunk's output forward and its input's gradient back.
  double sentBytes = 0;
  for (int s = 0; s < l.pp; ++s) {
    double sent = 0;
    for (int k = s; k < chunks; k += l.pp)
      sent += (k + 1 < chunks ? boundaryBytes[k] : 0) + (k > 0 ? boundaryBytes[k - 1] : 0);
    sentBytes = std::max(sentBytes, sent);
  }
  const int micro = static_cast<int>(l.microBatches);
  const double mb = static_cast<double>(l.microBatches);
  std::vector<double> pipeFwd = st.fwd, pipeBwd = st.bwd;
  std::vector<StageCompute> alone;
  const PipelineCores cores = pipelineCores(st, pipeFwd, pipeBwd, alone);
  const PipelineRun bare =
      simulatePipeline(c.pipelineSchedule, l.pp, micro, l.v, pipeFwd, pipeBwd, 0.0, false, false, cores);
  const PipelineRun run =
      simulatePipeline(c.pipelineSchedule, l.pp, micro, l.v, pipeFwd, pipeBwd, links, true, !m.asyncSends, cores);
  if (m.sharedCores > 0) r.computeS = *std::max_element(bare.computeS.begin(), bare.computeS.end());
  r.bubbleS = std::max(0.0, bare.makespan - r.computeS - st.tpExposed);
  st.p2pExposed = run.makespan - bare.makespan;
  if (st.p2pExposed < 0) {
    // The sums on the links found their buckets fuller than the compute
    // between them refills (what the bare run counts): they, and the
    // waits behind them, took less, not the messages.
    const double fromSums = std::min(st.tpExposed, -st.p2pExposed);
    st.tpExposed -= fromSums;
    r.bubbleS = std::max(0.0, r.bubbleS + st.p2pExposed + fromSums);
    st.p2pExposed = 0;
  }
  r.bytesPerRank += mb * sentBytes;
  // Every replica's and slice's pipeline sends its own messages while other
  // stages compute, which keep the cores full that part of the step.
  if (m.sharedCores > 0) {
    double coreWork = 0;
    for (const auto& sc : alone)
      coreWork += mb * (sc.forwardS + sc.backwardS + sc.recomputeS) * l.dp * l.tp * st.threads;
    const double full = std::min(1.0, coreWork / (m.sharedCores * run.makespan));
    for (int k = 0; k + 1 < chunks; ++k)
      if (links.host[k % l.pp] != links.host[(k + 1) % l.pp])
        st.busyBytes += 2 * boundaryBytes[k] * mb * l.dp * l.tp * full;
  }
  for (const auto& op : run.ops) {
    const int rank = parallel::meshRank({0, op.stage, 0}, {l.dp, l.pp, l.tp}, l.spread);
    r.spans.push_back({rank, 0, std::string(op.forward ? "F" : "B") + std::to_string(op.micro), "pipeline",
                       op.start * 1e6, (op.end - op.start) * 1e6});
  }
}

// What the gradient sync adds to the step, and the parameters the update then touches.
struct GradientSync {
  double seconds = 0, exposedS = 0;  // its communication, and what the step waits for of it
  double params = 0;                 // the largest stage's parameters (the update's)
};

// Gradients across replicas (or to the parameter servers): the strategy's own cost model.
GradientSync gradientSync(Step& st, Prediction& r) {
  const Layout& l = st.l;
  double gradParams = 0;
  int gradStage = 0;
  for (int s = 0; s < l.pp; ++s)
    if (st.stages[s].params > gradParams) gradParams = st.stages[s].params, gradStage = s;
  const SyncContext x{st.rc, st.m, st.p, l, gradParams, gradStage,
                      st.stages.back().backwardS + st.stages.back().recomputeS, st.share, st.sumsCrossHosts};
  SyncCost step;
  step.computeS = r.computeS;
  step.bytesPerRank = r.bytesPerRank;
  step.busyBytes = st.busyBytes;
  const SyncCost out = l.cost->sync(x, step);
  r.computeS = out.computeS;
  r.bytesPerRank = out.bytesPerRank;
  st.busyBytes = out.busyBytes;
  return {out.seconds, out.exposedS, gradParams};
}

// The update: parameters, gradients and state read, parameters and state written.
double optimizerSeconds(const Step& st, double gradParams) {
  const auto& c = st.rc.train;
  const Layout& l = st.l;
  const double opt = optimizerBytesPerParam(c);
  const double updated = gradParams / (c.zero >= 1 && !l.cost->hasServers ? l.dp : 1);
  const double touched = (12 + 2 * opt) * updated;
  double s = st.calibratedUpdate >= 0
                 ? st.calibratedUpdate * updated / std::max(1.0, static_cast<double>(st.p.params()))
                 : touched / st.m.memoryBytesPerS;
  if (c.offload != "none") s += 2 * opt * updated / st.m.memoryBytesPerS;
  if (c.offload == "params") s += 2 * 4 * updated / st.m.memoryBytesPerS;
  return s;
}

// Between steps every rank of the strategies that combine per step
// (runtime/Trainer.cpp: anyRankStops, reduceMetric) sums one number over all
// ranks: whether any was asked to stop (every step) and the loss (every
// --log-every steps).
double stepEndChecks(const Step& st) {
  const Layout& l = st.l;
  if (l.ranks <= 1 || !api::strategyEntry(l.strategy).sumsEveryStep) return 0;
  RankGroup world;
  world.size = l.ranks;
  world.perHost = std::min(l.ranks, l.placement.ranksPerHost);
  world.hostsSpanned = (l.ranks + world.perHost - 1) / world.perHost;
  double s = (1 + 1.0 / static_cast<double>(std::max<int64_t>(1, st.rc.train.logEvery))) *
             allreduceTime(st.m, l.placement, world, 8, "auto");
  // A pipeline's stages end their step apart and first meet in these sums, on
  // full shared cores: a sum after compute waits for its partner's core once
  // (calibrate's paired wait).
  if (l.pp > 1) s += st.partnerWait;
  return s;
}

// The step's terms, its samples and FLOPs, memory, and why (the largest term).
void finishStep(const Step& st, const GradientSync& sync, double checksS, Prediction& r) {
  const auto& c = st.rc.train;
  const Layout& l = st.l;
  const Machine& m = st.m;
  // Emulated hosts: the kernels' work for the bytes sent while ranks compute
  // runs on the cores those ranks share, once they keep every core busy.
  const double networkCoreS = m.sharedCores > 0 && st.coresAsked >= m.sharedCores
                                  ? m.link(LinkKind::InterHost).coreSPerByte * st.busyBytes / m.sharedCores
                                  : 0;
  r.exposedCommS = st.tpExposed + st.p2pExposed + sync.exposedS + checksS + networkCoreS;
  r.commS = st.tpExposed + st.p2pExposed + sync.seconds + checksS + networkCoreS;
  r.stepS = r.computeS + r.bubbleS + r.exposedCommS + r.optimizerS;
  const double samples = static_cast<double>(l.cost->hasServers ? c.batchSize * l.workers : l.samplesPerStep);
  r.samplesPerS = samples / r.stepS;
  r.flopsPerStep = samples * (3 * st.p.forwardFlops());
  for (const auto& layer : st.p.layers)
    if (c.recompute != "none" && layer.recomputeKeptBytes > 0) r.flopsPerStep += samples * layer.forwardFlops;
  r.memory = predictMemory(st.rc, l, st.p);
  const std::pair<double, std::string> terms[] = {
      {r.computeS, "compute"},
      {r.bubbleS, "pipeline bubble"},
      {sync.exposedS, l.cost->syncTerm},
      {st.tpExposed, "tensor-parallel sums"},
      {st.p2pExposed, "pipeline messages"},
      {r.optimizerS, "optimizer"},
      {checksS, "step-end checks"},
      {networkCoreS, "the network's core time"}};
  for (const auto& [seconds, name] : terms) r.terms.emplace_back(name, seconds);
  const auto* top = std::max_element(std::begin(terms), std::end(terms));
  r.dominant = top->second + " " + std::to_string(static_cast<int>(std::lround(100 * top->first / r.stepS))) + "%";
}

}  // namespace

Prediction simulate(const api::RunConfig& rc, const Machine& m, const SimulateOptions& o) {
  return simulate(rc, m, profileFor(rc, &m), o);
}

Prediction simulate(const api::RunConfig& rc, const Machine& m, const AnalyticModel& p0,
                    const SimulateOptions& o) {
  const auto& c = rc.train;
  Prediction r;
  // Stages balanced as the trainer balances them: by each layer's time on one micro-batch.
  std::vector<double> cost;
  if (c.pipelineStages > 1)
    for (const auto& [f, b] : layerTimes(rc, m, p0, 1, 1, 1)) cost.push_back(f + b);
  r.layout = layoutFor(rc, p0, o.hosts > 0 ? o.hosts : m.hosts.value_or(1), cost);
  Step st{rc, m, r.layout, pairedForLayout(p0, r.layout)};
  const Layout& l = st.l;
  st.stages = stageCompute(rc, m, st.p, l, &st.calibratedUpdate, 0, &st.share, &st.threads);
  st.act = static_cast<double>(l.microBatchSize * st.p.tokensPerSample * st.p.width) * st.p.elementBytes;
  st.tpGroup = meshGroup(l, MeshDim::Tensor);
  st.sumsCrossHosts = st.tpGroup.hostsSpanned > 1;
  st.coresAsked = computingRanks(l) * st.threads;
  st.partnerWait = m.sharedCores > 0 ? m.pairedSumWaitS(st.coresAsked / m.sharedCores) : 0;
  tensorSums(st, r);
  if (l.pp > 1) pipelinePhase(st, r);
  const GradientSync sync = gradientSync(st, r);
  r.optimizerS = optimizerSeconds(st, sync.params);
  finishStep(st, sync, stepEndChecks(st), r);
  return r;
}

}  // namespace dtrain::plan
