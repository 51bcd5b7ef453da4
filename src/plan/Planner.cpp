#include "plan/Planner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "api/Train.h"
#include "core/Error.h"
#include "nn/Gpt.h"
#include "parallel/localsgd/LocalSgdConfig.h"
#include "parallel/sandblaster/SandblasterConfig.h"
#include "plan/MemoryModel.h"

namespace dtrain::plan {

namespace {

std::vector<int> divisorsOf(int64_t n) {
  std::vector<int> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(static_cast<int>(i));
  return d;
}

struct PlanSearch {
  const PlanRequest& req;
  const Machine& machine;
  PlanResult result;
  std::optional<AnalyticModel> profile;

  void consider(runtime::TrainConfig c, const std::string& summary) {
    ++result.enumerated;
    api::RunConfig rc = req.base;
    rc.train = std::move(c);
    try {
      // Given: what differs from the defaults, the base file's options, and
      // the batch (equal to the default's 64 it is still the plan's choice,
      // not the model's default batch).
      api::Sources src = api::sourcesFromValues(rc);
      for (const auto& [id, origin] : req.baseSources.where) src.where.emplace(id, origin);
      src.where.emplace("training.batch_size", "--global-batch");
      rc = api::prepared(rc, src);
      if (!profile) profile = profileFor(rc, &machine);
      SimulateOptions o;
      o.hosts = req.hosts;
      Candidate cand{rc, simulate(rc, machine, *profile, o), summary, lossyChoice(rc.train), 0, true};
      for (const auto& m : cand.prediction.memory) cand.peakBytes = std::max(cand.peakBytes, m.peak);
      const double limit = req.memoryPerRank > 0 ? req.memoryPerRank : static_cast<double>(machine.memoryPerDeviceBytes);
      if (cand.peakBytes > limit) {
        ++result.tooBig;
        return;
      }
      result.ranked.push_back(std::move(cand));
    } catch (const UsageError&) {
      ++result.rejected;  // a combination the trainer refuses
    }
  }

  // Whether --sfb auto would send some Linear layer's factors (else it is the
  // plain allreduce candidate again).
  bool factorsPay(const runtime::TrainConfig& c, int dp) const {
    if (!profile) return false;
    return !factorLayers(*profile, "auto", c.batchSize * c.accumulate * profile->tokensPerSample, dp).empty();
  }

  runtime::TrainConfig start(int ranks) const {
    runtime::TrainConfig c = req.base.train;
    c.model = req.model;
    c.workers = ranks;
    c.backend = req.hosts > 1 ? "mpi" : "local";
    return c;
  }

  // Data parallelism knobs on top of a mesh: ZeRO, offload, recomputation, compression.
  void dataParallelVariants(runtime::TrainConfig c, const std::string& mesh, int dp, bool isMesh, bool gpt) {
    for (const std::string recompute : {"none", "blocks"}) {
      if (recompute != "none" && !gpt) continue;
      c.recompute = recompute;
      const std::string rs = recompute == "none" ? "" : ", recompute";
      for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
        c.zero = zero;
        const std::string zs = zero ? ", zero " + std::to_string(zero) : "";
        for (const std::string offload : {"none", "optimizer", "params"}) {
          if (offload != "none" && isMesh) continue;
          if (offload == "params" && zero != 3) continue;
          c.offload = offload;
          const std::string os = offload == "none" ? "" : ", offload " + offload;
          consider(c, mesh + zs + os + rs);
        }
        c.offload = "none";
      }
      c.zero = 0;
      if (dp > 1 && !isMesh) {  // compression: the allreduce strategy's
        for (const std::string k : {"fp16", "bf16", "qsgd", "topk", "powersgd"}) {
          c.compress = k;
          consider(c, mesh + ", compress " + k + rs);
        }
        c.compress = "none";
        if (factorsPay(c, dp)) {  // lossless: the same gradient, other bytes
          c.sfb = "auto";
          consider(c, mesh + ", sfb auto" + rs);
          c.sfb = "off";
        }
      }
    }
  }

  void run() {
    const int ranks = req.hosts * req.ranksPerHost;
    const bool gpt = req.model.rfind("gpt", 0) == 0;
    int64_t heads = 1, layers = 3;
    if (gpt) {
      const nn::GptConfig g = nn::gptConfig(req.model);
      heads = req.base.train.nHead.value_or(g.nHead);
      layers = req.base.train.nLayer.value_or(g.nLayer) + 2;
    }
    for (int tp : divisorsOf(ranks)) {
      if (gpt && heads % tp != 0) continue;
      for (int pp : divisorsOf(ranks / tp)) {
        if (pp > layers) continue;
        const int dp = ranks / (tp * pp);
        if (req.globalBatch % dp != 0) continue;
        const int64_t perReplica = req.globalBatch / dp;
        for (const std::string placement : {"pack", "spread"}) {
          if (placement == "spread" && (dp == 1 || tp * pp == 1)) continue;
          runtime::TrainConfig c = start(ranks);
          c.tensorParallel = tp;
          c.pipelineStages = pp;
          if (tp * pp > 1) c.placement = placement;
          std::string mesh = "dp " + std::to_string(dp) + (pp > 1 ? " x pp " + std::to_string(pp) : "") +
                             (tp > 1 ? " x tp " + std::to_string(tp) : "") + (placement == "spread" ? " spread" : "");
          if (pp == 1) {
            const int64_t tooBigBefore = result.tooBig;
            // Accumulation only saves memory (the same samples, in smaller
            // micro-steps): tried when the whole batch does not fit at once.
            for (int64_t acc : {1, 2, 4, 8}) {
              if (perReplica % acc != 0) continue;
              if (acc > 1 && result.tooBig == tooBigBefore) break;
              c.batchSize = perReplica / acc;
              c.accumulate = acc;
              dataParallelVariants(c, mesh + (acc > 1 ? ", accumulate " + std::to_string(acc) : ""), dp,
                                   tp > 1, gpt);
            }
            continue;
          }
          c.batchSize = perReplica;
          for (int64_t m : divisorsOf(perReplica)) {
            if (m < pp && m != perReplica) continue;
            c.microBatches = m;
            for (const std::string sched : {"gpipe", "1f1b"}) {
              for (int v : {1, 2, 4}) {
                if (v > 1 && (sched == "gpipe" || m % pp != 0 || pp * v > layers)) continue;
                c.pipelineSchedule = sched;
                c.virtualStages = v;
                dataParallelVariants(c, mesh + ", " + sched + (v > 1 ? " v" + std::to_string(v) : "") +
                                            " m " + std::to_string(m), dp, true, gpt);
              }
            }
          }
        }
      }
    }
    // Parameter servers: S servers and the other ranks training.
    for (int servers : {1, 2, req.ranksPerHost}) {
      const int workers = ranks - servers;
      if (workers < 1 || req.globalBatch % workers != 0) continue;
      if (servers == req.ranksPerHost && (servers == 1 || servers == 2)) continue;
      runtime::TrainConfig c = start(workers);
      c.strategy = "ps";
      c.servers = servers;
      c.batchSize = req.globalBatch / workers;
      for (const std::string consistency : {"sync", "async"}) {
        c.consistency = consistency;
        consider(c, "ps " + std::to_string(servers) + " servers x " + std::to_string(workers) + " workers, " +
                        consistency);
      }
    }
    // Sandblaster, where the run's optimizer is L-BFGS (its batch gradients cut
    // into units for the workers; 0, 1 or 2 parameter shards).
    if (req.base.train.optimizer == "lbfgs")
      for (int shards : {0, 1, 2}) {
        const int workers = ranks - 1 - shards;
        if (workers < 1 || req.globalBatch % workers != 0) continue;
        runtime::TrainConfig c = start(workers);
        c.strategy = "sandblaster";
        c.strategyOptions.mut<parallel::sandblaster::SandblasterConfig>().servers = shards;
        c.batchSize = req.globalBatch / workers;
        consider(c, "sandblaster " + std::to_string(workers) + " workers" +
                        (shards ? ", " + std::to_string(shards) + " shards" : ""));
      }
    // Local SGD and Hogwild! (lossy: what is learned changes).
    if (req.globalBatch % ranks == 0 && ranks > 1) {
      runtime::TrainConfig c = start(ranks);
      c.batchSize = req.globalBatch / ranks;
      c.strategy = "local-sgd";
      consider(c, "local-sgd dp " + std::to_string(ranks) + ", sync every " +
                      std::to_string(c.strategyOptions.get<parallel::localsgd::LocalSgdConfig>().syncEvery));
      if (req.hosts == 1) {
        c.strategy = "hogwild";
        consider(c, "hogwild " + std::to_string(ranks) + " threads");
      }
    }
  }
};

}  // namespace

PlanResult plan(const PlanRequest& r, const Machine& m) {
  DTRAIN_CHECK_USAGE(r.globalBatch >= 1, "--global-batch must be >= 1");
  DTRAIN_CHECK_USAGE(r.hosts >= 1 && r.ranksPerHost >= 1, "--hosts and --ranks-per-host must be >= 1");
  const auto t0 = std::chrono::steady_clock::now();
  PlanSearch s{r, m, {}, std::nullopt};
  // An unknown model, or one without a cost profile, is the user's mistake
  // (one line), not a search that finds nothing.
  api::RunConfig probe = r.base;
  probe.train.model = r.model;
  api::Sources src = api::sourcesFromValues(probe);
  for (const auto& [id, origin] : r.baseSources.where) src.where.emplace(id, origin);
  s.profile = profileFor(api::prepared(probe, src), &m);
  s.run();
  std::stable_sort(s.result.ranked.begin(), s.result.ranked.end(), [](const Candidate& a, const Candidate& b) {
    return a.prediction.samplesPerS > b.prediction.samplesPerS;
  });
  s.result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s.result;
}

AutoBatch autoGlobalBatch(const PlanRequest& r, const Machine& m) {
  AutoBatch a;
  const int64_t ranks = static_cast<int64_t>(r.hosts) * r.ranksPerHost;
  // Does some configuration (lossy ones only with --allow-lossy) fit at `batch`
  // in one pass (gradient accumulation and pipeline micro-batches fit any batch
  // by running more, smaller micro-batches)?
  auto fits = [&](int64_t batch, PlanResult* out) {
    PlanRequest q = r;
    q.globalBatch = batch;
    PlanResult res = plan(q, m);
    ++a.plans;
    const bool any = std::any_of(res.ranked.begin(), res.ranked.end(),
                                 [&](const Candidate& c) {
                                   return (c.lossy.empty() || r.allowLossy) && c.prediction.layout.microBatches == 1;
                                 });
    if (any && out) *out = std::move(res);
    return any;
  };
  // Memory grows with the batch: double while it fits. Powers of two only: in
  // between, what fits depends on divisibility (a batch of 2 x 257 cannot be
  // accumulated in 4 micro-steps), so it is not monotone.
  int64_t lo = 0;
  for (int64_t per = 1; per * ranks <= kMaxAutoBatch; per *= 2) {
    if (!fits(per * ranks, &a.result)) break;
    lo = per;
  }
  if (lo == 0) return a;
  a.globalBatch = lo * ranks;
  // The base as the trainer completes it for this model (gpt: adamw, its lr, text).
  api::RunConfig probe = r.base;
  probe.train.model = r.model;
  api::Sources src = api::sourcesFromValues(probe);
  for (const auto& [id, origin] : r.baseSources.where) src.where.emplace(id, origin);
  const runtime::TrainConfig c = api::prepared(probe, src).train;
  a.referenceBatch = c.batchSize;
  a.baseLr = c.lr;
  a.lr = c.lr * static_cast<double>(a.globalBatch) / static_cast<double>(std::max<int64_t>(1, c.batchSize));
  int64_t epoch = 0;
  if (c.dataset == "synthetic") epoch = c.syntheticSize;
  if (const auto data = knownDataset(c.dataset)) epoch = data->trainSamples;
  a.warmupFromEpochs = epoch > 0;
  const int64_t ramp = epoch > 0 ? (5 * epoch + a.globalBatch - 1) / a.globalBatch : kAutoWarmupSteps;
  a.warmupSteps = a.globalBatch > c.batchSize ? std::max(c.warmupSteps, ramp) : c.warmupSteps;
  for (Candidate& cand : a.result.ranked) {
    cand.config.train.lr = a.lr;
    cand.config.train.warmupSteps = a.warmupSteps;
    cand.config.train.scaleLr = false;  // scaled here already
  }
  return a;
}

}  // namespace dtrain::plan
