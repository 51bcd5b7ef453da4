#include "federated/FederatedRunner.h"

#include "core/StopSignal.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "autograd/Precision.h"
#include "core/Error.h"
#include "core/Timer.h"
#include "data/IndexPartition.h"
#include "federated/Aggregators.h"
#include "federated/ClientMessages.h"
#include "federated/Attacks.h"
#include "federated/SecureAggregation.h"
#include "core/Log.h"
#include "optim/Factory.h"
#include "parallel/MemoryGather.h"
#include "runtime/Checkpoint.h"
#include "runtime/Metrics.h"
#include "runtime/ModelPipeline.h"
#include "runtime/Progress.h"
#include "runtime/TensorBoard.h"
#include "runtime/ThreadCount.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::federated {
namespace {

std::vector<std::vector<int64_t>> partitionClients(const data::Dataset& train,
                                                   const FederatedOptions& o, uint64_t seed) {
  DTRAIN_CHECK_USAGE(o.clients <= train.size(), "--clients ", o.clients, " exceeds the ",
                     train.size(), " training samples");
  if (o.partition == "shards")
    return data::partitionByLabel(data::labelsOf(train), o.clients, o.shardsPerClient, seed);
  if (o.partition == "dirichlet")
    return data::partitionDirichlet(data::labelsOf(train), o.clients, o.dirichletAlpha, seed);
  if (o.quantitySkew > 0) return data::partitionQuantitySkew(train.size(), o.clients, o.quantitySkew, seed);
  return data::partitionIid(train.size(), o.clients, seed);
}

// The server optimizer applies the aggregated delta as a pseudo-gradient -delta
// (Reddi et al. 2021): SGD with lr 1 is plain FedAvg, SGD with momentum is FedAvgM,
// Adam with eps 1e-3 is FedAdam.
std::unique_ptr<optim::Optimizer> makeServerOptimizer(const FederatedOptions& o,
                                                      optim::NamedParameters params) {
  optim::OptimizerOptions so;
  so.lr = o.effectiveServerLr();
  if (o.serverOptimizer == "adam") {
    so.beta1 = 0.9;
    so.beta2 = 0.99;
    so.eps = 1e-3;
    return optim::makeOptimizer("adam", std::move(params), so);
  }
  so.momentum = o.serverOptimizer == "momentum" ? o.serverMomentum : 0.0;
  return optim::makeOptimizer("sgd", std::move(params), so);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL + (a << 6) + (a >> 2));
  return Rng(x).next();
}

}  // namespace

FederatedRunner::FederatedRunner(runtime::TrainConfig config, FederatedOptions options,
                                 runtime::TaskData data)
    : config_(std::move(config)), options_(std::move(options)), onMetrics_(data.onMetrics) {
  options_.validate();
  const nn::ModelInfo info = nn::modelInfo(config_.model, runtime::modelOverrides(config_));
  DTRAIN_CHECK_USAGE(info.task == nn::kClassificationTask, "--strategy fedavg trains classifiers "
                     "(mlp, lenet); --model ", config_.model, " is a ", info.task, " model");
  if (!data.train || !data.test) data = runtime::loadTaskData(config_, true);
  DTRAIN_CHECK_USAGE(data.train, "--strategy fedavg partitions a dataset held in memory among its "
                     "clients; --dataset ", config_.dataset, " streams (use npy, idx or fashion-mnist)");
  train_ = data.train;
  task_ = runtime::makeTask({config_, info, 0, 1, true}, data);
  clients_ = partitionClients(*train_, options_, config_.seed);
  malicious_ = chooseAttackers(options_.clients, options_.attackers, config_.seed);
  // Slow clients: another draw from the seed (a different stream than the attackers').
  slow_ = chooseAttackers(options_.clients, options_.slowClients, config_.seed ^ 0x510eULL);
  server_ = runtime::buildModel(config_, runtime::dataShape(config_, data));
  // --load: the global model's starting point (the weights of any run's
  // checkpoint of this model; its optimizer and training state do not apply).
  if (auto checkpoint = runtime::readCheckpoint(config_))
    runtime::loadCheckpoint(*checkpoint, config_.load, *server_, nullptr, nullptr);
  serverOptimizer_ = makeServerOptimizer(options_, server_->namedParameters());
  global_.resize(static_cast<size_t>(flatSize(*server_)));
  update_.resize(global_.size());
  DTRAIN_CHECK_USAGE(options_.deadlineClock != "wall" || config_.backend == "mpi",
                     "--deadline-clock wall runs across processes: use it with --backend mpi "
                     "(simulated clients train on --deadline-clock simulated)");
  const int threads = std::min(config_.workers, options_.clientsPerRound());
  for (int w = 0; w < std::max(1, threads); ++w)
    workers_.push_back(std::make_unique<LocalTrainer>(config_, options_, *task_, train_));
}

FederatedRunner::~FederatedRunner() = default;

std::vector<int> FederatedRunner::selectClients(Rng& rng) const {
  std::vector<int> chosen;
  if (options_.dp()) {
    // Poisson sampling: each client independently with probability q = C, as the
    // subsampled-Gaussian accountant assumes.
    for (int k = 0; k < options_.clients; ++k)
      if (rng.uniform() < options_.clientFraction) chosen.push_back(k);
    return chosen;
  }
  // m distinct clients, uniformly (a partial Fisher-Yates shuffle).
  std::vector<int> ids(static_cast<size_t>(options_.clients));
  for (int k = 0; k < options_.clients; ++k) ids[k] = k;
  const int m = options_.clientsPerRound();
  for (int i = 0; i < m; ++i) std::swap(ids[i], ids[i + rng.below(ids.size() - i)]);
  chosen.assign(ids.begin(), ids.begin() + m);
  return chosen;
}

void FederatedRunner::aggregate(std::vector<ClientResult>& results,
                                const std::vector<int>& reporters, Rng& rng,
                                std::span<float> out) {
  if (options_.dp()) {
    // DP-FedAvg: clip each delta to norm S, sum, add N(0, (z S)^2) per coordinate,
    // divide by the expected number of clients q K (a fixed denominator, so that one
    // client changes the result by at most S / (q K)).
    const double clip = options_.dpClip;
    std::fill(out.begin(), out.end(), 0.0f);
    for (auto& r : results) {
      double norm2 = 0;
      for (float v : r.delta) norm2 += static_cast<double>(v) * v;
      const float scale = static_cast<float>(std::min(1.0, clip / std::max(1e-12, std::sqrt(norm2))));
      for (size_t i = 0; i < out.size(); ++i) out[i] += scale * r.delta[i];
    }
    const double sigma = options_.dpNoise * clip;
    const double expected = options_.clientFraction * options_.clients;
    for (float& v : out) v = static_cast<float>((v + sigma * rng.normal()) / expected);
    return;
  }
  UpdateSet set;
  for (size_t k = 0; k < results.size(); ++k) {
    set.updates.emplace_back(results[k].delta);
    set.weights.push_back(static_cast<double>(clients_[reporters[k]].size()));
  }
  aggregator(options_.aggregator)(set, {options_.trimFraction, options_.byzantine}, out);
}

bool FederatedRunner::secureMean(const std::vector<int>& selected, const std::vector<int>& reporters,
                                 const std::vector<ClientResult>& results, int64_t round,
                                 RoundStats& s) {
  // Each client's input is its delta weighted by n_k / (samples of the selected
  // clients): the sum is the weighted mean had all reported, rescaled below to
  // the reporters' samples. Weights are public (the server picks by them).
  const int n = static_cast<int>(selected.size());
  const int t = options_.secaggThresholdFor(n);
  SecureAggregation sa(n, t, global_.size());
  sa.setup();
  double selectedSamples = 0, reportedSamples = 0;
  for (int k : selected) selectedSamples += static_cast<double>(clients_[k].size());
  std::vector<int> survivors;
  std::vector<std::vector<uint32_t>> masked;
  std::vector<float> x(global_.size());
  for (size_t i = 0; i < reporters.size(); ++i) {
    const int index = static_cast<int>(std::find(selected.begin(), selected.end(), reporters[i]) -
                                       selected.begin());
    const double w = static_cast<double>(clients_[reporters[i]].size()) / selectedSamples;
    reportedSamples += static_cast<double>(clients_[reporters[i]].size());
    for (size_t j = 0; j < x.size(); ++j) x[j] = static_cast<float>(w * results[i].delta[j]);
    survivors.push_back(index);
    masked.push_back(sa.maskedInput(index, x));
  }
  std::vector<size_t> order(survivors.size());  // survivors in client order
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return survivors[a] < survivors[b]; });
  std::vector<int> sortedSurvivors;
  std::vector<std::vector<uint32_t>> sortedMasked;
  for (size_t i : order) {
    sortedSurvivors.push_back(survivors[i]);
    sortedMasked.push_back(std::move(masked[i]));
  }
  const SecAggTraffic traffic = sa.traffic();
  s.bytesUp = static_cast<int64_t>(reporters.size()) * traffic.upPerClient +
              static_cast<int64_t>(n - static_cast<int>(reporters.size())) *
                  (traffic.upPerClient - traffic.maskedBytes);  // the dropped shared their keys
  if (static_cast<int>(reporters.size()) < t) {
    if (!comm_ || comm_->rank() == 0)
      log::warn("round ", round, ": ", reporters.size(), " of ", n, " clients reported, fewer than "
              "the secure-aggregation threshold ", t, ": the round cannot be unmasked and is skipped");
    return false;
  }
  const std::vector<float> sum = sa.unmaskSum(sortedSurvivors, sortedMasked);
  const float rescale = static_cast<float>(selectedSamples / reportedSamples);
  for (size_t j = 0; j < update_.size(); ++j) update_[j] = sum[j] * rescale;
  if (sa.clamped() > 0 && (!comm_ || comm_->rank() == 0))
    log::warn("round ", round, ": ", sa.clamped(), " update values exceeded the secure-aggregation "
              "fixed-point range and were clamped");
  return true;
}

double FederatedRunner::clientSeconds(int k) const {
  const double work = static_cast<double>(clients_[k].size() * options_.localEpochs);
  return work / options_.clientSpeed * (slow_[k] ? options_.slowFactor : 1.0);
}

void FederatedRunner::setCommunicator(comm::Communicator* comm) {
  DTRAIN_CHECK_USAGE(comm->size() >= 2, "--strategy fedavg --backend mpi: rank 0 serves, the others "
                     "host the clients: run at least 2 processes (mpirun -np N, N >= 2)");
  comm_ = comm;
  workers_.resize(1);  // one process per host: one local trainer each
  if (wallClock() && comm_->rank() == 0)
    roundServer_ = std::make_unique<RoundServer>(*comm_, global_.size());
}

bool FederatedRunner::hosts(size_t i) const {
  if (!comm_) return true;
  return hostOf(i) == comm_->rank();
}

void FederatedRunner::exchangeResults(std::vector<ClientResult>& results) {
  // Per rank, its reporters in order, each as [mean loss, steps, delta...]
  // (the two doubles bit for bit in two floats each: the loss is reported).
  const size_t record = 4 + global_.size();
  std::vector<float> mine;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!hosts(i)) continue;
    const double head[2] = {results[i].meanLoss, static_cast<double>(results[i].steps)};
    const size_t at = mine.size();
    mine.resize(at + 4);
    std::memcpy(mine.data() + at, head, sizeof head);
    mine.insert(mine.end(), results[i].delta.begin(), results[i].delta.end());
  }
  const int p = comm_->size();
  std::vector<size_t> counts(static_cast<size_t>(p), 0);
  for (size_t i = 0; i < results.size(); ++i) counts[hostOf(i)] += record;
  std::vector<float> all(results.size() * record);
  comm_->allgatherv(mine.data(), all.data(), counts, DType::F32);
  std::vector<size_t> at(static_cast<size_t>(p), 0);
  for (int r = 1; r < p; ++r) at[r] = at[r - 1] + counts[r - 1];
  for (size_t i = 0; i < results.size(); ++i) {
    const float* rec = all.data() + at[hostOf(i)];
    at[hostOf(i)] += record;
    double head[2];
    std::memcpy(head, rec, sizeof head);
    results[i].meanLoss = head[0];
    results[i].steps = clientStepsFromPeer(head[1], detail::concat("rank ", hostOf(i)));
    results[i].delta.assign(rec + 4, rec + record);
  }
}

void FederatedRunner::drawRound(int64_t round, Rng& rng, std::vector<int>& selected,
                                std::vector<int>& reporters) const {
  rng = Rng(mix(config_.seed, static_cast<uint64_t>(round)));
  selected = selectClients(rng);
  reporters.clear();
  for (int k : selected)
    if (rng.uniform() >= options_.clientDropout && !clients_[k].empty()) reporters.push_back(k);
}

void FederatedRunner::trainClient(LocalTrainer& trainer, int64_t round, int client,
                                  ClientResult& out) {
  const Attack& attack = federated::attack(options_.attack);
  const bool bad = malicious_[client] != 0;
  const uint64_t seed = mix(mix(config_.seed, static_cast<uint64_t>(round)), client + 1);
  trainer.train(global_, {&clients_[client], seed, bad && attack.flipsLabels}, out);
  if (bad && attack.rewrite) {
    Rng attackRng(seed ^ 0xbadULL);
    attack.rewrite(out.delta, options_.attackScale, attackRng);
  }
}

void FederatedRunner::serveAsHost() {
  RoundHost host(*comm_, global_.size());
  Rng rng(0);
  std::vector<int> selected, reporters;
  ClientResult result;
  while (const auto round = host.next(global_)) {
    drawRound(*round, rng, selected, reporters);
    for (size_t i = 0; i < reporters.size(); ++i)
      if (hosts(i)) {
        const double t0 = nowMicros();
        trainClient(*workers_[0], *round, reporters[i], result);
        if (!config_.timeline.empty())
          timeline_.addWorkerSpan(rank(), 0, "client " + std::to_string(reporters[i]), "compute",
                                  t0, nowMicros());
        host.send(*round, i, result);
      }
  }
  host.flush();
}

RoundStats FederatedRunner::runRound(int64_t round) {
  parallel::SpanScope roundSpan(spans(), "round");
  Timer clock;
  RoundStats s;
  s.round = round;
  Rng rng(0);
  std::vector<int> selected, reporters;
  drawRound(round, rng, selected, reporters);
  if (options_.roundDeadlineS > 0 && !wallClock()) {
    // Late clients are known from the simulated clock before anyone trains:
    // their updates would be discarded, so they are not computed.
    const auto late = std::remove_if(reporters.begin(), reporters.end(), [&](int k) {
      return clientSeconds(k) > options_.roundDeadlineS;
    });
    s.late = static_cast<int>(reporters.end() - late);
    reporters.erase(late, reporters.end());
  }
  s.selected = static_cast<int>(selected.size());
  s.reported = static_cast<int>(reporters.size());
  const int64_t modelBytes = static_cast<int64_t>(global_.size() * sizeof(float));
  s.bytesDown = s.selected * modelBytes;
  s.bytesUp = s.reported * modelBytes;

  readFlat(*server_, global_);
  std::vector<ClientResult> results(reporters.size());
  if (wallClock()) {
    // The updates that came in time; the others are late (left out).
    std::vector<int> owners(reporters.size());
    for (size_t i = 0; i < owners.size(); ++i) owners[i] = hostOf(i);
    const std::vector<char> arrived =
        roundServer_->collect(round, global_, owners, options_.roundDeadlineS, results);
    size_t kept = 0;
    for (size_t i = 0; i < reporters.size(); ++i)
      if (arrived[i]) {
        if (kept != i) {  // (a self-move would empty the delta)
          reporters[kept] = reporters[i];
          results[kept] = std::move(results[i]);
        }
        ++kept;
      }
    reporters.resize(kept);
    results.resize(kept);
    s.late = s.reported - static_cast<int>(kept);
    s.reported = static_cast<int>(kept);
    s.bytesUp = s.reported * modelBytes;
  } else {
    trainHere(round, reporters, results);
    if (comm_) exchangeResults(results);
  }
  {
    parallel::SpanScope aggregateSpan(spans(), "aggregate");
    aggregateAndApply(round, selected, reporters, results, rng, s);
  }
  bytesUp_ += s.bytesUp;
  bytesDown_ += s.bytesDown;
  s.seconds = clock.seconds();
  return s;
}

void FederatedRunner::trainHere(int64_t round, const std::vector<int>& reporters,
                                std::vector<ClientResult>& results) {
  // Workers take the next client from a shared counter; results go to the client's
  // slot, so the aggregate does not depend on the number of workers.
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failureMutex;
  const bool timed = !config_.timeline.empty();
  auto work = [&](LocalTrainer& trainer, int worker) {
    memory::DomainScope accounted(memoryDomain_);  // memory_per_rank: this rank's
    try {
      for (size_t i; (i = next.fetch_add(1)) < reporters.size();) {
        if (!hosts(i)) continue;  // --backend mpi: another rank trains it
        const double t0 = timed ? nowMicros() : 0;
        trainClient(trainer, round, reporters[i], results[i]);
        if (timed)
          timeline_.addWorkerSpan(rank(), worker, "client " + std::to_string(reporters[i]),
                                  "compute", t0, nowMicros());
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failureMutex);
      if (!failure) failure = std::current_exception();
      next = reporters.size();
    }
  };
  const size_t threads = std::min(workers_.size(), reporters.size());
  std::vector<std::thread> pool;
  for (size_t w = 1; w < threads; ++w)
    pool.emplace_back(work, std::ref(*workers_[w]), static_cast<int>(w));
  if (threads > 0) work(*workers_[0], 0);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

void FederatedRunner::aggregateAndApply(int64_t round, const std::vector<int>& selected,
                                        const std::vector<int>& reporters,
                                        std::vector<ClientResult>& results, Rng& rng,
                                        RoundStats& s) {
  double lossSum = 0;
  for (const auto& r : results) lossSum += r.meanLoss;
  s.trainLoss = results.empty() ? 0 : lossSum / static_cast<double>(results.size());
  const bool enough = reporters.size() >= minimumUpdates(options_.aggregator,
                                                         {options_.trimFraction, options_.byzantine});
  bool unmasked = true;
  if (options_.secureAggregation && !reporters.empty())
    unmasked = secureMean(selected, reporters, results, round, s);
  if (unmasked && (options_.dp() || (enough && !reporters.empty()))) {
    if (!options_.secureAggregation) aggregate(results, reporters, rng, update_);
    // The pseudo-gradient -delta through the server optimizer.
    serverOptimizer_->zeroGrad();
    size_t at = 0;
    for (auto& [name, p] : server_->namedParameters()) {
      float* g = p.grad().data<float>();
      for (int64_t k = 0; k < p.numel(); ++k) g[k] = -update_[at + k];
      at += static_cast<size_t>(p.numel());
    }
    serverOptimizer_->step();
    // A non-finite model (an attack the rule let through, too high an lr) would only
    // turn every later round into NaNs: stop here, naming the round.
    readFlat(*server_, global_);
    const bool finite = std::all_of(global_.begin(), global_.end(), [](float v) { return std::isfinite(v); });
    DTRAIN_CHECK(finite, "round ", round, ": the global model diverged (not finite) with --aggregator ",
                 options_.aggregator,
                 options_.attack != "none" ? " under --attack " + options_.attack : std::string(),
                 "; try a robust --aggregator or a lower --lr");
  }
  if (options_.dp()) {
    // Without noise clipping alone protects nothing: epsilon is infinite.
    if (options_.dpNoise > 0) accountant_.step(options_.clientFraction, options_.dpNoise);
    s.epsilon = options_.dpNoise > 0 ? accountant_.epsilon(options_.dpDelta)
                                     : std::numeric_limits<double>::infinity();
  }
}

nlohmann::json FederatedRunner::run() {
  const auto& c = config_;
  const auto& o = options_;
  kernels::configureKernels(runtime::resolvedThreads(c, 1), kernels::parseGemmBackend(c.gemm));
  autograd::setPrecision(autograd::parsePrecision(c.precision));
  if (comm_) comm_->barrier();  // aligns the ranks' timeline clocks
  timeline_.setOrigin(nowMicros());
  if (wallClock() && comm_->rank() != 0) {
    serveAsHost();
    memoryPerRank();
    writeOutputs();
    return {};
  }
  using P = runtime::TrainConfig::Progress;
  const auto mode = c.progress == P::Auto    ? runtime::Progress::autoMode()
                    : c.progress == P::Bar   ? runtime::Progress::Mode::Bar
                    : c.progress == P::Lines ? runtime::Progress::Mode::Lines
                                             : runtime::Progress::Mode::Off;
  runtime::Progress progress(comm_ && comm_->rank() != 0 ? runtime::Progress::Mode::Off : mode,
                            o.rounds);
  const bool reporting = !(comm_ && comm_->rank() != 0);
  runtime::MetricsWriter metrics(reporting ? c.metrics : "",
                                 reporting ? runtime::withTensorBoard(c.tensorboard, onMetrics_)
                                           : std::function<void(const nlohmann::json&)>{});
  progress.message(detail::concat(
      "fedavg: ", c.model, " (", server_->parameterCount(), " parameters) on ",
      task_->describeData(), ", ", o.clients, " clients (", o.partition, "), ",
      o.clientsPerRound(), " per round", o.dp() ? " (Poisson, DP)" : "", ", E=", o.localEpochs,
      " B=", o.localBatch == 0 ? std::string("all") : std::to_string(o.localBatch), ", ",
      workers_.size(), " worker threads"));
  const int64_t evalEvery = c.evalEvery > 0 ? c.evalEvery : 1;
  Timer clock;
  double evalSeconds = 0;
  std::vector<double> roundSeconds;
  std::optional<int64_t> roundsToTarget;
  nlohmann::json last;
  RoundStats s;
  int64_t lateClients = 0;  // --round-deadline-s
  int64_t round = 1;
  for (; round <= o.rounds; ++round) {
    s = runRound(round);
    // Ctrl-C / SIGTERM (core/StopSignal.h): rounds have no checkpoint to resume from.
    if (stop::requested())
      throw stop::Interrupted(detail::concat("stopped by ", stop::signalName(), " after round ", round,
                                             "; --strategy fedavg saves nothing on a signal"));
    roundSeconds.push_back(s.seconds);
    lateClients += s.late;
    nlohmann::json rec{{"round", round},
                       {"clients_selected", s.selected},
                       {"clients_reported", s.reported},
                       {"clients_late", s.late},
                       {"train_loss", s.trainLoss},
                       {"bytes_up", s.bytesUp},
                       {"bytes_down", s.bytesDown},
                       {"round_s", s.seconds}};
    if (s.epsilon) rec["dp_epsilon"] = *s.epsilon;
    const bool evalNow = round % evalEvery == 0 || round == o.rounds;
    if (evalNow) {
      Timer t;
      last = task_->evaluate(*server_);
      evalSeconds += t.seconds();
      for (const auto& [k, v] : last.items()) rec[k] = v;
      if (o.targetAccuracy > 0 && !roundsToTarget &&
          last.value("test_accuracy", 0.0) >= o.targetAccuracy)
        roundsToTarget = round;
    }
    rec["time_s"] = clock.seconds() - evalSeconds;
    metrics.write(rec);
    // The bar counts rounds; line mode prints only the evaluation lines below.
    if (mode == runtime::Progress::Mode::Bar) progress.update(round, 0, s.trainLoss, 0, false);
    if (evalNow)
      progress.message(detail::concat("round ", round, ": ", s.reported, "/", s.selected,
                                      " clients reported, ", task_->describeEvaluation(last),
                                      s.epsilon ? detail::concat(", epsilon ", *s.epsilon)
                                                : std::string()));
    if (roundsToTarget) break;
  }
  if (roundServer_) roundServer_->finish();
  progress.finish();
  const int64_t ran = std::min(round, o.rounds);
  if (last.empty()) last = task_->evaluate(*server_);
  std::vector<double> sorted = roundSeconds;
  std::sort(sorted.begin(), sorted.end());
  nlohmann::json out = last;
  out["rounds"] = ran;
  out["seconds"] = clock.seconds() - evalSeconds;
  out["round_s_median"] = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  out["train_loss"] = s.trainLoss;
  out["bytes_up"] = bytesUp_;
  out["bytes_down"] = bytesDown_;
  out["clients"] = o.clients;
  out["clients_per_round"] = o.clientsPerRound();
  out["partition"] = o.partition;
  out["local_epochs"] = o.localEpochs;
  out["local_batch"] = o.localBatch;
  out["server_optimizer"] = o.serverOptimizer;
  out["aggregator"] = o.aggregator;
  if (o.proxMu > 0) out["prox_mu"] = o.proxMu;
  if (o.clientDropout > 0) out["client_dropout"] = o.clientDropout;
  if (o.roundDeadlineS > 0) {
    out["round_deadline_s"] = o.roundDeadlineS;
    out["clients_late"] = lateClients;
  }
  if (comm_) out["deadline_clock"] = o.deadlineClock;
  if (o.secureAggregation) {
    out["secure_aggregation"] = true;
    out["secagg_threshold"] = o.secaggThresholdFor(o.clientsPerRound());
  }
  if (o.attack != "none") {
    out["attack"] = o.attack;
    out["attackers"] = o.attackers;
  }
  if (o.dp()) {
    out["dp_epsilon"] = s.epsilon.value_or(0.0);
    out["dp_delta"] = o.dpDelta;
    out["dp_clip"] = o.dpClip;
    out["dp_noise"] = o.dpNoise;
  }
  if (o.targetAccuracy > 0) {
    out["target_accuracy"] = o.targetAccuracy;
    out["rounds_to_target"] = roundsToTarget ? nlohmann::json(*roundsToTarget) : nlohmann::json();
  }
  out["worker_threads"] = workers_.size();
  out["parameters"] = server_->parameterCount();
  out["memory_per_rank"] = memoryPerRank();
  writeOutputs();
  metrics.write(out);
  return out;
}

nlohmann::json FederatedRunner::memoryPerRank() {
  const memory::RankMemory mine = memory::snapshot(*memoryDomain_);
  return parallel::memoryPerRankJson(comm_ ? parallel::allgatherMemory(*comm_, mine)
                                           : std::vector<memory::RankMemory>{mine});
}

void FederatedRunner::writeOutputs() {
  const auto& c = config_;
  if (!c.timeline.empty()) {
    if (comm_) timeline_.writeGathered(*comm_, c.timeline);
    else timeline_.write(c.timeline);
  }
  if (!c.save.empty() && rank() == 0) {
    // The global model as any run's checkpoint: at step 0 with the run's seed,
    // so that `train --load` starts from it rather than resuming mid-run.
    runtime::TrainState state;
    state.rng = Rng(c.seed).state();
    state.metadata = runtime::modelMetadata(c);
    runtime::saveCheckpoint(c.save, *server_, nullptr, state);
    log::info("saved the global model to ", c.save);
  }
}

}  // namespace dtrain::federated
