#include "runtime/Trainer.h"

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "autograd/Ops.h"
#include "core/Log.h"
#include "core/ThreadPool.h"
#include "core/Timer.h"
#include "data/DistributedSampler.h"
#include "data/FashionMnist.h"
#include "data/Loader.h"
#include "data/SyntheticDataset.h"
#include "nn/Models.h"
#include "optim/Factory.h"
#include "runtime/Checkpoint.h"
#include "runtime/Metrics.h"
#include "runtime/Progress.h"
#include "tensor/cpu/Blas.h"
#include "tensor/cpu/Reduce.h"

namespace dtrain::runtime {

using autograd::Variable;

nlohmann::json TrainResult::toJson() const {
  nlohmann::json j{{"steps", steps},
                   {"epochs", epochs},
                   {"seconds", seconds},
                   {"samples_per_s", samplesPerS},
                   {"train_loss", trainLoss},
                   {"test_accuracy", testAccuracy},
                   {"test_loss", testLoss}};
  for (const auto& [k, v] : strategyStats) j[k] = v;
  for (const auto& [k, v] : strategyReport.items()) j[k] = v;
  return j;
}

std::shared_ptr<const data::Dataset> loadDataset(const TrainConfig& c, bool train) {
  if (c.dataset == "synthetic") {
    data::SyntheticConfig sc;
    sc.size = train ? c.syntheticSize : std::max<int64_t>(1, c.syntheticSize / 6);
    sc.seed = 12345;  // the same task for every run; train/test differ by sample index
    auto base = std::make_shared<data::SyntheticDataset>(sc);
    if (train) return base;
    // Test samples: indices past the training range of the same generator.
    data::SyntheticConfig tc = sc;
    tc.size = c.syntheticSize + sc.size;
    auto all = std::make_shared<data::SyntheticDataset>(tc);
    std::vector<int64_t> idx(sc.size);
    for (int64_t i = 0; i < sc.size; ++i) idx[i] = c.syntheticSize + i;
    return std::make_shared<data::SubsetDataset>(all, std::move(idx));
  }
  return data::loadFashionMnist(c.dataDir, train);
}

std::pair<double, double> evaluate(nn::Module& model, const data::Dataset& dataset,
                                   int64_t batchSize) {
  autograd::NoGradGuard noGrad;
  const bool wasTraining = model.isTraining();
  model.eval();
  int64_t correct = 0;
  double lossSum = 0;
  std::vector<int32_t> pred;
  for (int64_t begin = 0; begin < dataset.size(); begin += batchSize) {
    const int64_t end = std::min(dataset.size(), begin + batchSize);
    data::Batch b = dataset.range(begin, end);
    Variable logits = model.forward(Variable(b.x));
    const int64_t n = end - begin, classes = logits.shape()[1];
    lossSum += autograd::crossEntropy(logits, b.y).item() * static_cast<double>(n);
    pred.resize(n);
    kernels::argmaxRows(logits.data().data<float>(), n, classes, pred.data());
    const int32_t* y = b.y.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) correct += pred[i] == y[i];
  }
  model.train(wasTraining);
  const double n = static_cast<double>(std::max<int64_t>(1, dataset.size()));
  return {static_cast<double>(correct) / n, lossSum / n};
}

Trainer::Trainer(TrainConfig config, std::unique_ptr<parallel::Strategy> strategy)
    : config_(std::move(config)), strategy_(std::move(strategy)) {
  config_.validate();
  model_ = nn::makeModel(config_.model, config_.seed);
  optimizer_ = optim::makeOptimizer(config_.optimizer, model_->namedParameters(),
                                    optimizerOptions(config_));
}

optim::OptimizerOptions optimizerOptions(const TrainConfig& c) {
  optim::OptimizerOptions o;
  o.lr = c.lr;
  o.weightDecay = c.weightDecay;
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

void Trainer::setData(std::shared_ptr<const data::Dataset> train,
                      std::shared_ptr<const data::Dataset> test) {
  train_ = std::move(train);
  test_ = std::move(test);
}

namespace {
// A span on the compute lane when a timeline is recording (one branch otherwise).
struct SpanScope {
  parallel::SpanRecorder* rec;
  const char* name;
  double t0;
  SpanScope(parallel::SpanRecorder* r, const char* n) : rec(r), name(n), t0(r ? nowMicros() : 0) {}
  ~SpanScope() {
    if (rec) rec->span(name, "compute", parallel::Lane::Compute, t0, nowMicros());
  }
};
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
}  // namespace

TrainResult Trainer::run() {
  const TrainConfig& c = config_;
  if (strategy_->ownsProcess()) {
    setNumThreads(c.threads);
    kernels::setBlasThreads(c.threads);
  }
  const bool reporter = strategy_->isReporter();
  parallel::SpanRecorder* spans = timeline_ ? timeline_->recorder(strategy_->rank()) : nullptr;
  strategy_->setSpanRecorder(spans);

  auto train = train_ ? train_ : loadDataset(c, true);
  auto test = test_ ? test_ : (reporter ? loadDataset(c, false) : nullptr);
  // Gradient accumulation: each rank's loader yields K micro-batches of B at once
  // (local batch K*B), so the union over ranks and micro-steps is the global batch
  // N*K*B of the sampler contract.
  const int accumulate = static_cast<int>(c.accumulate);
  data::DistributedSampler sampler({train->size(), c.batchSize * accumulate,
                                    strategy_->worldSize(), c.seed, c.shuffle});
  const int64_t perEpoch = sampler.stepsPerEpoch();
  int64_t total = perEpoch * c.epochs;
  if (c.maxSteps > 0) total = std::min(total, c.maxSteps);

  TrainState state;
  state.rng = Rng(c.seed).state();
  if (!c.load.empty()) {
    loadCheckpoint(c.load, *model_, optimizer_.get(), &state);
    if (reporter) log::info("resumed from ", c.load, " at step ", state.step);
  }
  strategy_->setup(*model_, *optimizer_);

  // Linear scaling rule (Goyal et al.): lr x workers, usually with --warmup-steps.
  const double baseLr = c.scaleLr ? c.lr * strategy_->worldSize() : c.lr;
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
  MetricsWriter metrics(reporter ? c.metrics : "");
  if (reporter)
    progress.message(detail::concat("training ", c.model, " (", model_->parameterCount(),
                                    " parameters) on ", c.dataset, " (", train->size(),
                                    " samples): ", total, " steps of batch ",
                                    sampler.globalBatch(),
                                    strategy_->worldSize() > 1
                                        ? detail::concat(" (", strategy_->worldSize(),
                                                         " workers, ", strategy_->name(), ")")
                                        : std::string(),
                                    ", ", optimizer_->describe()));

  TrainResult r;
  int64_t step = state.step;
  double evalSeconds = 0, windowLoss = 0;
  int64_t windowSteps = 0;
  Timer clock, window;
  const int64_t globalBatch = sampler.globalBatch();
  // Each micro-step's loss is a mean over B samples; seeding backward with 1/K
  // makes the accumulated gradient the mean over the K*B samples.
  Tensor seed;
  StragglerDelay delay(c, strategy_->rank());
  struct Deferred {
    int64_t step, epoch;
    double seconds;
    std::vector<Tensor> state;
  };
  std::vector<Deferred> deferred;  // --eval-deferred
  bool stopped = false;
  for (int64_t epoch = step / perEpoch; epoch < c.epochs && step < total && !stopped; ++epoch) {
    data::Loader loader(train, sampler, strategy_->rank(), epoch,
                        {step - epoch * perEpoch, c.prefetch});
    r.epochs = epoch + 1;
    for (data::Batch b;;) {
      if (step >= total) break;
      if (strategy_->stopBefore(step)) {
        stopped = true;
        break;
      }
      {
        SpanScope s(spans, "data");
        if (!loader.next(b)) break;
      }
      optimizer_->setLr(schedule->lrAt(step));
      strategy_->beginStep(step);
      model_->zeroGrad();
      double stepLoss = 0;
      for (int k = 0; k < accumulate; ++k) {
        strategy_->beginMicroStep(k, accumulate);
        Tensor x = b.x, y = b.y;
        if (accumulate > 1) {
          x = b.x.slice(0, k * c.batchSize, (k + 1) * c.batchSize);
          y = b.y.slice(0, k * c.batchSize, (k + 1) * c.batchSize);
        }
        Variable loss;
        {
          SpanScope s(spans, "forward");
          loss = autograd::crossEntropy(model_->forward(Variable(x)), y);
        }
        const float l = loss.item();
        if (!std::isfinite(l))
          throw Error(detail::concat("loss became ", std::isnan(l) ? "NaN" : "infinite",
                                     " at step ", step + 1, " (epoch ", epoch + 1,
                                     "); try a lower --lr (now ", optimizer_->lr(), ")"));
        SpanScope s(spans, "backward");
        if (accumulate > 1) {
          if (!seed.defined()) seed = Tensor::full(loss.shape(), 1.0f / accumulate);
          loss.backward(seed);
        } else {
          loss.backward();
        }
        stepLoss += l;
      }
      if (delay.active()) {
        SpanScope s(spans, "straggler delay");
        delay.sleep();
      }
      strategy_->finishGradients();
      {
        SpanScope s(spans, "optimizer");
        strategy_->applyUpdate(*optimizer_);
      }
      ++step;
      windowLoss += stepLoss / accumulate;
      ++windowSteps;

      const bool logNow = step % c.logEvery == 0 || step == total;
      if (logNow || mode == Progress::Mode::Bar) {
        const double rate = windowSteps * globalBatch / std::max(1e-9, window.seconds());
        // Only logged steps combine the loss across ranks: every rank must make
        // the same collective calls, and only rank 0 draws a bar.
        const double meanLoss = logNow ? strategy_->reduceMetric(windowLoss / windowSteps)
                                       : windowLoss / windowSteps;
        progress.update(step, epoch, meanLoss, rate, logNow);
        if (logNow) {
          r.trainLoss = meanLoss;
          if (reporter) {
            nlohmann::json rec{{"step", step},   {"epoch", epoch + 1},
                               {"loss", meanLoss}, {"lr", optimizer_->lr()},
                               {"samples_per_s", rate}};
            for (auto& [k, v] : strategy_->stats()) rec[k] = v;
            metrics.write(rec);
          }
          windowLoss = 0;
          windowSteps = 0;
          window.reset();
        }
      }
      if (c.evalEvery > 0 && step % c.evalEvery == 0 && step < total && reporter) {
        Timer t;
        // time_s: training time so far, evaluations excluded (time-to-accuracy plots).
        const double trainSeconds = clock.seconds() - evalSeconds;
        strategy_->syncModel(*model_, nullptr);
        if (c.evalDeferred) {
          deferred.push_back({step, epoch + 1, trainSeconds, snapshotState(*model_)});
        } else {
          auto [acc, tl] = evaluate(*model_, *test, c.evalBatch);
          progress.message(detail::concat("step ", step, ": test accuracy ", acc, ", test loss ", tl));
          metrics.write({{"step", step}, {"epoch", epoch + 1}, {"test_accuracy", acc},
                         {"test_loss", tl}, {"time_s", trainSeconds}});
        }
        evalSeconds += t.seconds();
        window.reset();
      }
    }
  }
  r.seconds = clock.seconds() - evalSeconds;
  r.steps = step;
  const int64_t ranSteps = step - state.step;
  r.samplesPerS = ranSteps * globalBatch / std::max(1e-9, r.seconds);
  strategy_->finish(*model_, *optimizer_);
  r.strategyStats = strategy_->stats();
  r.strategyReport = strategy_->report();
  progress.finish();

  if (reporter) {
    strategy_->syncModel(*model_, c.save.empty() ? nullptr : optimizer_.get());
    if (!deferred.empty()) {
      // The snapshots, in order, then the final state back for its own evaluation.
      auto final = snapshotState(*model_);
      for (const auto& d : deferred) {
        restoreState(*model_, d.state);
        auto [acc, tl] = evaluate(*model_, *test, c.evalBatch);
        metrics.write({{"step", d.step}, {"epoch", d.epoch}, {"test_accuracy", acc},
                       {"test_loss", tl}, {"time_s", d.seconds}});
      }
      restoreState(*model_, final);
    }
    auto [acc, tl] = evaluate(*model_, *test, c.evalBatch);
    r.testAccuracy = acc;
    r.testLoss = tl;
    metrics.write({{"step", step}, {"test_accuracy", acc}, {"test_loss", tl}, {"time_s", r.seconds}});
    if (!r.strategyReport.empty()) metrics.write(r.strategyReport);
    if (!c.save.empty()) {
      state.step = step;
      state.epoch = step / perEpoch;
      state.metadata["model"] = c.model;
      saveCheckpoint(c.save, *model_, optimizer_.get(), state);
      log::info("saved checkpoint ", c.save, " at step ", step);
    }
  }
  return r;
}

}  // namespace dtrain::runtime
