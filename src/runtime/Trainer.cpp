#include "runtime/Trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>
#include <vector>

#include "autograd/Precision.h"
#include "core/Log.h"
#include "core/Offload.h"
#include "core/StopSignal.h"
#include "runtime/LaunchHooks.h"
#include "data/FiniteFeatures.h"
#include "data/KjvCorpus.h"
#include "core/Timer.h"
#include "optim/Factory.h"
#include "parallel/MemoryGather.h"
#include "runtime/Checkpoint.h"
#include "runtime/CheckpointDir.h"
#include "runtime/EarlyStopping.h"
#include "runtime/GradClip.h"
#include "runtime/LoraSetup.h"
#include "runtime/ModelPipeline.h"
#include "runtime/Metrics.h"
#include "runtime/Progress.h"
#include "runtime/StragglerWatch.h"
#include "runtime/TensorBoard.h"
#include "runtime/ThreadCount.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::runtime {

using autograd::Variable;

nlohmann::json TrainResult::toJson() const {
  nlohmann::json j{{"steps", steps},
                   {"epochs", epochs},
                   {"epochs_completed", epochsCompleted},
                   {"seconds", seconds},
                   {"samples_per_s", samplesPerS},
                   {"data_wait_s", dataWaitSeconds},
                   {"effective_lr", effectiveLr},
                   {"train_loss", trainLoss},
                   {"parameters", parameters},
                   {"trainable_parameters", trainableParameters},
                   {"optimizer_state_bytes", optimizerStateBytes}};
  for (const auto& [k, v] : evaluation.items()) j[k] = v;
  for (const auto& [k, v] : strategyStats) j[k] = v;
  for (const auto& [k, v] : strategyReport.items()) j[k] = v;
  j["memory_per_rank"] = memoryPerRank;
  if (stragglerWatched) j["straggler"] = straggler;
  j["rss_bytes"] = rssBytes;
  j["rss_peak_bytes"] = rssPeakBytes;
  return j;
}

Trainer::Trainer(TrainConfig config, std::unique_ptr<parallel::Strategy> strategy, TaskData data)
    : config_(std::move(config)), strategy_(std::move(strategy)), data_(std::move(data)) {
  config_.validate();
  modelInfo_ = nn::modelInfo(config_.model, modelOverrides(config_));
  // build -> recompute -> --load -> LoRA -> adapters (runtime/ModelPipeline.h); the
  // optimizer gets the trainable parameters only.
  PreparedModel prepared = prepareModel(config_, dataShape(config_, data_));
  model_ = std::move(prepared.model);
  resumeFrom_ = std::move(prepared.resumeFrom);
  optimizer_ = optim::makeOptimizer(config_.optimizer, nn::trainableParameters(*model_),
                                    optimizerOptions(config_));
}

Trainer::~Trainer() { strategy_.reset(); }

std::string offloadDirectory(const TrainConfig& c) {
  const std::string dir = c.offloadDir.empty() ? data::defaultCacheDir() + "/offload" : c.offloadDir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  DTRAIN_CHECK_USAGE(std::filesystem::is_directory(dir), "--offload-dir ", dir,
                     ": not a directory and cannot be created",
                     ec ? " (" + ec.message() + ")" : std::string());
  return dir;
}

optim::OptimizerOptions optimizerOptions(const TrainConfig& c) {
  optim::OptimizerOptions o;
  o.lr = c.lr;
  o.weightDecay = c.weightDecay;
  if (c.decay2dOnly) o.decay2dOnly = true;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  if (c.optimizer == "lbfgs") o.lbfgsHistory = static_cast<int>(c.lbfgsHistory);
  if (c.offload != "none") o.offloadDir = offloadDirectory(c);
  if (c.optimizer == "sgd" || c.optimizer == "lars") {
    o.momentum = c.momentum.value_or(0.9);
    o.nesterov = c.nesterov;
  } else {
    DTRAIN_CHECK_USAGE(!c.momentum, "--momentum applies to --optimizer sgd and lars only");
    DTRAIN_CHECK_USAGE(!c.nesterov, "--nesterov applies to --optimizer sgd and lars only");
  }
  return o;
}

parallel::ps::PsOptions psOptions(const TrainConfig& c, int rank) {
  parallel::ps::PsOptions o;
  o.servers = c.servers;
  o.workers = c.workers;
  o.consistency = parallel::ps::consistencyFromName(c.consistency);
  o.staleness = c.staleness;
  o.backupWorkers = c.backupWorkers;
  o.pushEvery = c.pushEvery;
  o.fetchEvery = c.fetchEvery;
  o.timeoutS = c.psTimeoutS;
  o.sspEagerReads = c.sspReads == "eager";
  o.compress = compressOptions(c);  // the pushes (parallel/ps/PushCodec.h)
  o.clipGradNorm = c.clipGradNorm;
  o.optimizer = c.optimizer;
  o.optimizerOptions = optimizerOptions(c);
  const bool server = rank < c.servers;
  const auto& kills = server ? c.killServer : c.killWorker;
  const int index = server ? rank : rank - c.servers;
  if (auto it = kills.find(index); it != kills.end()) o.killAt = it->second;
  if (auto it = c.pauseWorker.find(index); !server && it != c.pauseWorker.end())
    o.pauseAt = it->second;
  return o;
}

parallel::compress::CompressOptions compressOptions(const TrainConfig& c) {
  parallel::compress::CompressOptions o;
  o.name = c.compress;
  o.bits = c.compressBits;
  o.ratio = c.compressRatio;
  o.rank = c.compressRank;
  o.startStep = c.compressStartStep;
  o.collective = c.compressCollective;
  o.seed = c.seed;
  return o;
}

void Trainer::setData(std::shared_ptr<const data::Dataset> train,
                      std::shared_ptr<const data::Dataset> test) {
  data_.train = std::move(train);
  data_.test = std::move(test);
}

namespace {
using parallel::SpanScope;
// The extra time a worker spends per step (--straggler, --random-delay): a
// sleep, so that it frees the core as a slower machine would.
class StragglerDelay {
 public:
  StragglerDelay(const TrainConfig& c, int worker)
      : fixedMs_(c.stragglerMs.count(worker) ? c.stragglerMs.at(worker) : 0.0),
        meanRandomMs_(c.randomDelayMs), rng_(c.seed * 1000003 + 17 + worker) {}
  bool active() const { return fixedMs_ > 0 || meanRandomMs_ > 0; }
  void sleep() {
    double ms = fixedMs_;
    if (meanRandomMs_ > 0) ms += -meanRandomMs_ * std::log(1.0 - rng_.uniform());  // exponential
    if (ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1e3)));
  }

 private:
  double fixedMs_, meanRandomMs_;
  Rng rng_;
};
// Copies of the parameters and buffers (--eval-deferred), and back.
// A loss that turned NaN or infinite came from the input (the batch holds such a
// value: data the load checks did not see) or from the optimisation.
std::string nonFiniteLoss(double loss, int64_t step, int64_t epoch, const Tensor& x, double lr) {
  const std::string what = detail::concat("loss became ", std::isnan(loss) ? "NaN" : "infinite",
                                          " at step ", step, " (epoch ", epoch, ")");
  if (const std::string bad = data::firstNonFiniteFeature(x); !bad.empty())
    return detail::concat(what, " from its input: the batch's ", bad, "; check the data");
  return detail::concat(what, " in the optimisation (its input is finite); try a lower --lr (now ",
                        lr, ")");
}

std::vector<Tensor> snapshotState(nn::Module& m) {
  std::vector<Tensor> out;
  for (auto& [name, p] : m.namedParameters()) out.push_back(p.data().clone());
  for (auto& [name, t] : m.namedBuffers()) out.push_back(t->clone());
  return out;
}
void restoreState(nn::Module& m, const std::vector<Tensor>& state) {
  size_t i = 0;
  for (auto& [name, p] : m.namedParameters()) p.data().copyFrom(state.at(i++));
  for (auto& [name, t] : m.namedBuffers()) t->copyFrom(state.at(i++));
}
// Resuming with another number of workers: the data order is a function of the
// global step (data/DistributedSampler.h) and the optimizer state is whole in
// the file, so the run goes on as one of this size would; only per-rank
// strategy state (compression residuals) has no meaning for other ranks.
void noteWorldChange(TrainState& state, int64_t replicas, int64_t globalBatch, bool reporter,
                     int64_t savedStep, bool dataExact) {
  if (state.worldSize > 0 && state.worldSize != replicas) {
    // Per-rank state ("rank<r>.*") is dropped; state every rank shares (local
    // SGD's anchor and outer momentum, "outer.*") goes on.
    bool perRank = false;
    for (auto it = state.strategyState.begin(); it != state.strategyState.end();) {
      if (it->first.rfind("rank", 0) == 0) {
        perRank = true;
        it = state.strategyState.erase(it);
      } else {
        ++it;
      }
    }
    if (reporter)
      log::info("the checkpoint was taken by ", state.worldSize, " workers, this run has ",
                replicas, perRank ? ": their per-rank compression residuals start again at zero"
                                  : std::string());
  }
  if (dataExact && state.worldSize != replicas && reporter)  // the task mapped its position
    log::info("the checkpoint's step ", savedStep, " is step ", state.step, " at this world size: ",
              "the epoch goes on with the samples it has not yet given out");
  else if (state.globalBatch > 0 && state.globalBatch != globalBatch && reporter)
    log::warn("the checkpoint was taken with a global batch of ", state.globalBatch,
              " samples, this run's is ", globalBatch,
              ": it goes on from step ", state.step, ", so the samples it sees differ from the ",
              "original run's");
}
}  // namespace

void Trainer::saveCheckpointNow(TrainState state, int64_t step, int64_t perEpoch,
                                int64_t globalBatch, bool reporter, bool say) {
  const TrainConfig& c = config_;
  state.strategyState = strategy_->checkpointState();  // collective
  if (!reporter) return;
  strategy_->syncModel(*model_, optimizer_.get());  // ZeRO: its gathered optimizer state
  state.step = step;
  state.epoch = step / perEpoch;
  state.worldSize = strategy_->dataReplicas();
  state.globalBatch = globalBatch;
  for (auto& [k, v] : modelMetadata(c)) state.metadata[k] = v;
  const std::string path = writeToCheckpointDir(state, step);
  if (say) log::info("checkpoint ", path);
}

std::string Trainer::writeToCheckpointDir(const TrainState& state, int64_t step) {
  const TrainConfig& c = config_;
  const std::string path = checkpointPath(c.checkpointDir, step);
  saveCheckpoint(path, *model_, optimizer_.get(), state);
  markLatest(c.checkpointDir, path);
  pruneCheckpoints(c.checkpointDir, c.keepCheckpoints);
  return path;
}

TrainResult Trainer::run() {
  const TrainConfig& c = config_;
  if (strategy_->ownsProcess()) {
    kernels::configureKernels(resolvedThreads(c, 1), kernels::parseGemmBackend(c.gemm));
  }
  autograd::setPrecision(autograd::parsePrecision(c.precision));
  const bool reporter = strategy_->isReporter();
  parallel::SpanRecorder* spans = timeline_ ? timeline_->recorder(strategy_->rank()) : nullptr;
  strategy_->setSpanRecorder(spans);

  // The data-parallel replica picks the batches (a pipeline's stages read the same).
  auto task = makeTask({c, modelInfo_, strategy_->dataRank(), strategy_->dataReplicas(), reporter},
                       data_);
  const int accumulate = static_cast<int>(c.accumulate);
  const int64_t perEpoch = task->stepsPerEpoch();
  int64_t total = perEpoch * c.epochs;
  if (c.maxSteps > 0) total = std::min(total, c.maxSteps);

  TrainState state;
  state.rng = Rng(c.seed).state();
  EarlyStopping early(c.earlyStopMetric, c.earlyStopPatience);
  DTRAIN_CHECK_USAGE(!early.active() || strategy_->checkpointsBetweenSteps(),
                     "--early-stop-patience needs ranks that step together; --strategy ",
                     strategy_->name(), "'s ranks run at their own pace");
  if (resumeFrom_) {
    loadCheckpoint(*resumeFrom_, c.load, *model_, optimizer_.get(), &state);
    resumeFrom_.reset();
    early.readFrom(state.metadata);
    // A run that stopped early resumes as stopped (its count went into the checkpoint).
    if (early.stopped()) total = std::min(total, *early.stoppedAt());
    if (reporter && state.step >= total)
      log::info("resumed from ", c.load, " at step ", state.step, ": this run ends at step ",
                total, ", so there is nothing more to train");
    else if (reporter)
      log::info("resumed from ", c.load, " at step ", state.step);
    const int64_t savedStep = state.step;
    const Task::ResumePoint resumed = task->resumeStep(state);
    state.step = resumed.step;
    noteWorldChange(state, strategy_->dataReplicas(), task->globalBatch(), reporter, savedStep,
                    resumed.exactAtThisWorldSize);
  }
  strategy_->setup(*model_, *optimizer_);
  if (!state.strategyState.empty()) strategy_->loadCheckpointState(state.strategyState);

  // Linear scaling rule (Goyal et al.), usually with --warmup-steps: --lr is
  // the rate for one --batch-size, scaled by the global batch of an optimizer
  // step over it: data replicas x --accumulate micro-batches (not the workers
  // alone, which left accumulation's K-times larger batch at the unscaled lr).
  const double baseLr =
      c.scaleLr ? c.lr * static_cast<double>(task->globalBatch()) / static_cast<double>(c.batchSize)
                : c.lr;
  optim::ScheduleOptions so;
  so.tMax = std::max<int64_t>(1, total);
  so.stepSize = c.stepSize > 0 ? c.stepSize : std::max<int64_t>(1, perEpoch);
  so.gamma = c.gamma;
  so.warmupSteps = c.warmupSteps;
  auto schedule = optim::makeSchedule(c.schedule, baseLr, so);

  Progress::Mode mode = c.progress == TrainConfig::Progress::Auto ? Progress::autoMode()
                        : c.progress == TrainConfig::Progress::Bar ? Progress::Mode::Bar
                        : c.progress == TrainConfig::Progress::Lines ? Progress::Mode::Lines
                                                                     : Progress::Mode::Off;
  if (!reporter) mode = Progress::Mode::Off;
  Progress progress(mode, total);
  MetricsWriter metrics(reporter ? c.metrics : "",
                        reporter ? withTensorBoard(c.tensorboard, data_.onMetrics)
                                 : std::function<void(const nlohmann::json&)>{});
  if (reporter)
    progress.message(detail::concat("training ", c.model, " (", model_->parameterCount(),
                                    " parameters) on ", task->describeData(), ": ", total,
                                    " steps of batch ", task->globalBatch(),
                                    // The workers asked for (not a coordinator's or
                                    // servers' ranks, which compute no gradients).
                                    strategy_->worldSize() > 1
                                        ? detail::concat(" (", c.workers,
                                                         c.workers == 1 ? " worker, " : " workers, ",
                                                         strategy_->name(), ")")
                                        : std::string(),
                                    ", ", optimizer_->describe(),
                                    optimizer_->decay2dOnly() ? " on 2-D parameters" : "",
                                    c.clipGradNorm > 0
                                        ? detail::concat(", clip grad norm ", c.clipGradNorm)
                                        : std::string()));

  TrainResult r;
  r.effectiveLr = baseLr;
  int64_t step = state.step;
  const int64_t firstStep = step;
  double evalSeconds = 0, windowLoss = 0;
  int64_t windowSteps = 0;
  Timer clock, window;
  const int64_t globalBatch = task->globalBatch();
  double gradNorm = 0;  // before clipping, of the last step (--clip-grad-norm)
  // The step's forwards and backwards are the strategy's schedule (Strategy::forwardBackward).
  parallel::StepWork work;
  work.microBatchSize = c.batchSize;
  work.microBatches = accumulate;
  work.lossFromOutput = [&task](const Variable& out, const Tensor& y) {
    return task->lossFromOutput(out, y);
  };
  work.spans = spans;
  StragglerDelay delay(c, strategy_->rank());
  StragglerWatch stragglers(*strategy_);  // the slow rank, named (StragglerWatch.h)
  struct Deferred {
    int64_t step, epoch;
    double seconds;
    std::vector<Tensor> state;
  };
  std::vector<Deferred> deferred;  // --eval-deferred
  bool stopped = false;
  bool interrupted = false;    // stopped early on a signal
  bool stoppedEarly = false;   // --early-stop-patience
  std::string stopCheckpoint;  // where that stop saved
  for (int64_t epoch = step / perEpoch; epoch < c.epochs && step < total && !stopped; ++epoch) {
    task->beginEpoch(epoch, step);
    r.epochs = epoch + 1;
    for (data::Batch b;;) {
      if (step >= total) break;
      if (strategy_->stopBefore(step)) {
        stopped = true;
        break;
      }
      stragglers.beginStep();
      comm::flight::setStep(step + 1);  // as people count steps (the progress line's)
      {
        SpanScope s(spans, "data");
        Timer waited;
        const bool more = task->nextBatch(b);
        r.dataWaitSeconds += waited.seconds();
        if (!more) break;
        for (auto& [k, v] : task->dataPosition()) state.metadata[k] = v;  // for a checkpoint
      }
      optimizer_->setLr(schedule->lrAt(step));
      strategy_->beginStep(step);
      strategy_->zeroGradients(*model_);
      work.x = b.x;
      work.y = b.y;
      work.step = step;
      work.epoch = epoch;
      double stepLoss;
      {
        memory::CategoryScope activations(memory::Category::Activations);  // memory_per_rank
        stepLoss = strategy_->forwardBackward(*model_, work);
      }
      if (!std::isfinite(stepLoss))
        throw Error(nonFiniteLoss(stepLoss, step + 1, epoch + 1, b.x, optimizer_->lr()));
      if (delay.active()) {
        SpanScope s(spans, "straggler delay");
        delay.sleep();
      }
      stragglers.arrived();
      strategy_->finishGradients();
      stragglers.synced();
      if (c.clipGradNorm > 0) gradNorm = clipGradNorm(*model_, *strategy_, c.clipGradNorm);
      if (optimizer_->needsLossClosure()) {
        // L-BFGS's line search: the loss and gradients of this step's batch at
        // the parameters it tries (the strategy's forwards and backwards again).
        optimizer_->setLossClosure(
            [&] {
              strategy_->zeroGradients(*model_);
              memory::CategoryScope activations(memory::Category::Activations);
              const double loss = strategy_->forwardBackward(*model_, work);
              strategy_->finishGradients();
              return loss;
            },
            stepLoss);
      }
      {
        SpanScope s(spans, "optimizer");
        strategy_->applyUpdate(*optimizer_);
      }
      ++step;
      windowLoss += stepLoss;
      ++windowSteps;
      // The last step goes into --checkpoint-dir too (with or without --checkpoint-every),
      // so that `--resume auto` of a finished run resumes finished, and one run's last
      // checkpoint goes on exactly as a periodic one would.
      const bool lastToDir =
          step == total && !c.checkpointDir.empty() && strategy_->checkpointsBetweenSteps();
      const bool periodic =
          (c.checkpointEvery > 0 && step % c.checkpointEvery == 0 && step < total) || lastToDir;
      if (periodic) {
        SpanScope s(spans, "checkpoint");
        saveCheckpointNow(state, step, perEpoch, globalBatch, reporter);
      }
      afterStepForLaunch(step, strategy_->rank(), reporter);  // dtrain launch (LaunchHooks.h)
      // Ctrl-C or SIGTERM (core/StopSignal.h): every rank stops after this step.
      stop::raiseAtStepForTests(step, reporter);
      if (stop::requested() && !strategy_->savesOnStop())
        throw stop::Interrupted(detail::concat(
            "stopped by ", stop::signalName(), " after step ", step, "; --strategy ",
            strategy_->name(), " saves nothing on a signal (its ranks stop at their own steps)"));
      bool peerStops = false;
      {
        SpanScope s(spans, "stop check");  // one number summed over every rank
        peerStops = strategy_->anyRankStops(stop::requested());
      }
      if (peerStops && step < total) {
        stop::request();  // a peer's signal: this process stops as if it had one
        stopped = interrupted = true;
        if (!c.checkpointDir.empty()) {
          SpanScope s(spans, "checkpoint");
          if (!periodic) saveCheckpointNow(state, step, perEpoch, globalBatch, reporter, false);
          stopCheckpoint = checkpointPath(c.checkpointDir, step);
        }
        break;
      }

      const bool logNow = step % c.logEvery == 0 || step == total;
      if (logNow || mode == Progress::Mode::Bar) {
        const double rate = windowSteps * globalBatch / std::max(1e-9, window.seconds());
        // Only logged steps combine the loss across ranks: every rank must make
        // the same collective calls, and only rank 0 draws a bar.
        double meanLoss = windowLoss / windowSteps;
        if (logNow) {
          SpanScope s(spans, "loss sum");
          meanLoss = strategy_->reduceMetric(meanLoss);
          stragglers.atLog(step);
        }
        progress.update(step, epoch, meanLoss, rate, logNow);
        if (logNow) {
          r.trainLoss = meanLoss;
          if (reporter) {
            nlohmann::json rec{{"step", step},   {"epoch", epoch + 1},
                               {"loss", meanLoss}, {"lr", optimizer_->lr()},
                               {"samples_per_s", rate}, {"data_wait_s", r.dataWaitSeconds},
                               // training time so far, as the evaluations' (loss against time)
                               {"time_s", clock.seconds() - evalSeconds}};
            if (c.clipGradNorm > 0) rec["grad_norm"] = gradNorm;
            if (!stragglers.rankWorkMs().empty()) {  // per rank: work, then the wait for the others
              rec["rank_work_ms"] = stragglers.rankWorkMs();
              rec["rank_wait_ms"] = stragglers.rankWaitMs();
            }
            for (auto& [k, v] : strategy_->stats()) rec[k] = v;
            metrics.write(rec);
          }
          windowLoss = 0;
          windowSteps = 0;
          window.reset();
        }
      }
      bool stopEarly = false;
      if (c.evalEvery > 0 && step % c.evalEvery == 0 && step < total && reporter) {
        Timer t;
        // time_s: training time so far, evaluations excluded (time-to-accuracy plots).
        const double trainSeconds = clock.seconds() - evalSeconds;
        strategy_->syncModel(*model_, nullptr);
        if (c.evalDeferred) {
          deferred.push_back({step, epoch + 1, trainSeconds, snapshotState(*model_)});
        } else {
          nlohmann::json rec = task->evaluate(*model_);
          progress.message(detail::concat("step ", step, ": ", task->describeEvaluation(rec)));
          rec["step"] = step;
          rec["epoch"] = epoch + 1;
          rec["time_s"] = trainSeconds;
          metrics.write(rec);
          stopEarly = early.observe(rec, step);
          early.writeTo(state.metadata);
        }
        evalSeconds += t.seconds();
        window.reset();
      }
      // Every rank learns the reporter's decision at the same step (one tiny sum).
      if (early.active() && c.evalEvery > 0 && step % c.evalEvery == 0 && step < total &&
          strategy_->anyRankStops(stopEarly)) {
        if (reporter) log::info(early.describeStop());  // also under --progress off
        stopped = stoppedEarly = true;
        // Again when periodic: this checkpoint holds the decision (a resume stays stopped).
        if (!c.checkpointDir.empty()) {
          SpanScope s(spans, "checkpoint");
          saveCheckpointNow(state, step, perEpoch, globalBatch, reporter);
        }
        break;
      }
    }
    task->endEpoch();
  }
  r.seconds = clock.seconds() - evalSeconds;
  r.steps = step;
  r.stragglerWatched = stragglers.watching();
  r.straggler = stragglers.result();
  r.epochsCompleted = step / perEpoch;
  state.worldSize = strategy_->dataReplicas();
  state.globalBatch = globalBatch;
  const int64_t ranSteps = step - state.step;
  r.samplesPerS = ranSteps * globalBatch / std::max(1e-9, r.seconds);
  // This rank's memory as training left it (finish may gather the whole model
  // to the reporter: that is for evaluation and saving, not training's).
  const memory::RankMemory trainedMemory = memory::snapshot(*memoryDomain_);
  r.rssBytes = memory::residentSetBytes();
  r.rssPeakBytes = memory::residentSetPeakBytes();
  strategy_->finish(*model_, *optimizer_);
  // Collective (every rank's compression residuals go to the reporter).
  // Stopped on a signal with --checkpoint-dir: that checkpoint is the run's, not --save.
  const bool saveAtEnd = !c.save.empty() && !(interrupted && !c.checkpointDir.empty());
  // Ranks at their own pace save their last step into --checkpoint-dir once all have
  // finished (the others did in the loop).
  const bool finalToDir = !c.checkpointDir.empty() && !interrupted && !stoppedEarly &&
                          firstStep < total &&
                          !strategy_->checkpointsBetweenSteps();
  if (saveAtEnd || finalToDir) state.strategyState = strategy_->checkpointState();
  r.strategyStats = strategy_->stats();
  r.strategyReport = strategy_->report();
  r.parameters = model_->parameterCount();
  r.trainableParameters = nn::trainableParameterCount(*model_);
  for (auto& [name, t] : optimizer_->namedState()) r.optimizerStateBytes += t->nbytes();
  // memory_per_rank: after stats(), so its collective is not counted there.
  r.memoryPerRank = parallel::memoryPerRankJson(
      strategy_->gatherMemory(trainedMemory));
  progress.finish();

  if (reporter) {
    strategy_->syncModel(*model_, saveAtEnd || finalToDir ? optimizer_.get() : nullptr);
    // The whole model's (tensor parallelism cut it before syncModel).
    r.parameters = model_->parameterCount();
    r.trainableParameters = nn::trainableParameterCount(*model_);
    if (!deferred.empty() && !interrupted) {
      // The snapshots, in order, then the final state back for its own evaluation.
      auto final = snapshotState(*model_);
      for (const auto& d : deferred) {
        restoreState(*model_, d.state);
        nlohmann::json rec = task->evaluate(*model_);
        rec["step"] = d.step;
        rec["epoch"] = d.epoch;
        rec["time_s"] = d.seconds;
        metrics.write(rec);
      }
      restoreState(*model_, final);
    }
    // Stopped on a signal: no final evaluation (the user wants out), only the save.
    if (!interrupted) {
      r.evaluation = task->evaluate(*model_);
      r.testAccuracy = r.evaluation.value("test_accuracy", 0.0);
      r.testLoss = r.evaluation.value("test_loss", 0.0);
      nlohmann::json rec = r.evaluation;
      rec["step"] = step;
      rec["time_s"] = r.seconds;
      metrics.write(rec);
      const nlohmann::json extra = task->finalFields(r.samplesPerS);  // outlives items()
      for (const auto& [k, v] : extra.items()) r.evaluation[k] = v;
      const nlohmann::json earlyFields = early.resultFields();  // outlives items()
      for (const auto& [k, v] : earlyFields.items()) r.evaluation[k] = v;
      if (!r.strategyReport.empty()) metrics.write(r.strategyReport);
    }
    state.step = step;
    state.epoch = step / perEpoch;
    for (auto& [k, v] : modelMetadata(c)) state.metadata[k] = v;
    if (saveAtEnd) {
      saveCheckpoint(c.save, *model_, optimizer_.get(), state);
      if (interrupted) stopCheckpoint = c.save;
      else log::info("saved checkpoint ", c.save, " at step ", step);
    }
    if (finalToDir) log::info("checkpoint ", writeToCheckpointDir(state, step), " (the last step)");
    if (!c.saveAdapters.empty()) saveAdapters(c.saveAdapters, c, *model_);  // LoRA
  }
  if (interrupted) stop::recordStop({true, step, reporter ? stopCheckpoint : "", reporter});
  return r;
}

}  // namespace dtrain::runtime
