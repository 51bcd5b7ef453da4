#include "cli/TrainCommand.h"

#include <algorithm>
#include <iostream>
#include <memory>

#include <cstdlib>
#include <string>
#include <vector>
#include <type_traits>
#include <mutex>
#include <optional>
#include <tuple>

#include "comm/Registry.h"
#include "comm/local/Local.h"
#include "core/Timer.h"
#include "nn/ModelRegistry.h"
#include "runtime/CheckpointDir.h"
#include "runtime/OutputPaths.h"
#include "runtime/Task.h"
#include "optim/Factory.h"
#include "cli/RankRunner.h"
#include "cli/FederatedFlags.h"  // federated learning
#include "parallel/allreduce/DataParallel.h"
#include "runtime/Timeline.h"
#include "runtime/Trainer.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::cli {

namespace {

struct TrainFlags {
  runtime::TrainConfig config;
  double momentum = -1;  // -1: the optimizer's default
  std::string progress = "auto";
  bool noShuffle = false;
  bool noOverlap = false;
  bool workersGiven = false;
  std::vector<std::string> stragglers, killWorkers, killServers, pauseWorkers;  // "INDEX:VALUE"
  std::string adamBetas;                                  // "B1,B2"
  int64_t nLayer = 0, nHead = 0, nEmbd = 0, blockSize = 0;  // set only when given
  std::shared_ptr<federated::FederatedOptions> federated;  // federated learning flags
};

// "B1,B2" of --adam-betas.
std::pair<double, double> parseBetas(const std::string& text) {
  const auto comma = text.find(',');
  try {
    if (comma != std::string::npos) {
      size_t used1 = 0, used2 = 0;
      const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
      const double b1 = std::stod(a, &used1), b2 = std::stod(b, &used2);
      if (used1 == a.size() && used2 == b.size()) return {b1, b2};
    }
  } catch (const std::exception&) {
  }
  throw UsageError("--adam-betas " + text + ": expected B1,B2 (e.g. --adam-betas 0.9,0.95)");
}

// "INDEX:VALUE" of --straggler, --kill-worker, --kill-server.
template <typename V>
std::pair<int, V> parseIndexValue(const std::string& flag, const std::string& text) {
  const auto colon = text.find(':');
  try {
    if (colon != std::string::npos && colon > 0 && colon + 1 < text.size()) {
      size_t used1 = 0, used2 = 0;
      const int index = std::stoi(text.substr(0, colon), &used1);
      const std::string rest = text.substr(colon + 1);
      V value;
      if constexpr (std::is_floating_point_v<V>) value = std::stod(rest, &used2);
      else value = std::stoll(rest, &used2);
      if (used1 == colon && used2 == rest.size()) return {index, value};
    }
  } catch (const std::exception&) {
  }
  throw UsageError(detail::concat(flag, " ", text, ": expected INDEX:", 
                                  std::is_floating_point_v<V> ? "MS" : "N", " (e.g. ", flag, " 3:",
                                  std::is_floating_point_v<V> ? "20" : "100", ")"));
}

// True when this process was started by mpirun (OpenMPI or another PMI launcher).
bool underMpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

nlohmann::json resultLine(const runtime::TrainConfig& c, const runtime::TrainResult& r,
                          int workers, const std::string& strategy, const std::string& backend) {
  nlohmann::json out = r.toJson();
  out["model"] = c.model;
  out["dataset"] = c.dataset;
  out["batch_size"] = c.batchSize;
  out["threads"] = c.threads;
  out["gemm"] = c.gemm;
  out["precision"] = c.precision;
  out["workers"] = workers;
  out["strategy"] = strategy;
  out["backend"] = backend;
  // A pipeline's stages of one replica share its batch, and so do a Megatron
  // tensor-parallel group's ranks (krizhevsky: each reads its own).
  const bool krizhevsky = c.tensorParallelStyle == "krizhevsky";
  if (strategy != "single")
    out["global_batch"] = c.batchSize * c.accumulate *
                          (workers / c.pipelineStages / (krizhevsky ? 1 : c.tensorParallel));
  if (krizhevsky) out["tensor_parallel_style"] = c.tensorParallelStyle;
  if (c.offload != "none") out["offload"] = c.offload;
  if (strategy == "allreduce") {
    out["accumulate"] = c.accumulate;
    out["overlap"] = c.overlap;
    out["allreduce_algo"] = c.allreduceAlgo;
    out["compress"] = c.compress;
    if (c.compress == "qsgd") out["compress_bits"] = c.compressBits;
    if (c.compress == "topk" || c.compress == "randomk") out["compress_ratio"] = c.compressRatio;
    if (c.compress == "powersgd") {
      out["compress_rank"] = c.compressRank;
      out["compress_start_step"] = c.compressStartStep;
    }
    if (c.compressCollective != "allgather") out["compress_collective"] = c.compressCollective;
  }
  if (strategy == "ps") {
    out["servers"] = c.servers;
    out["consistency"] = c.consistency;
    if (c.consistency == "ssp") {
      out["staleness"] = c.staleness;
      out["ssp_reads"] = c.sspReads;
      if (c.sspReads == "eager") out["fetch_every"] = c.fetchEvery;
    }
    if (c.consistency == "sync") out["backup_workers"] = c.backupWorkers;
    if (c.consistency == "async") {
      out["push_every"] = c.pushEvery;
      out["fetch_every"] = c.fetchEvery;
    }
  }
  return out;
}

// --workers N --backend local: the ranks (workers, and servers for ps) as
// threads of this process, sharing one copy of the datasets and one timeline.
void runLocal(const runtime::TrainConfig& c) {
  // Process-wide: each rank's kernels use c.threads threads (default 1 per worker).
  kernels::configureKernels(c.threads, kernels::parseGemmBackend(c.gemm));
  runtime::Timeline timeline;
  SharedRun shared;
  shared.data = runtime::loadTaskData(c, true);
  if (!c.timeline.empty()) shared.timeline = &timeline;
  if (c.strategy == "hogwild") shared.hogwild = std::make_shared<parallel::HogwildShared>(c.workers);
  timeline.setOrigin(nowMicros());
  std::optional<runtime::TrainResult> result;
  std::mutex resultMutex;
  comm::local::runLocal(worldSizeFor(c), [&](comm::Communicator& comm) {
    auto r = runRank(c, comm, shared);
    std::lock_guard<std::mutex> lock(resultMutex);
    if (r) result = std::move(r);
  });
  DTRAIN_CHECK(result, "no rank reported a result");
  if (!c.timeline.empty()) timeline.write(c.timeline);
  std::cout << resultLine(c, *result, c.workers, c.strategy, "local").dump() << std::endl;
}

// One rank of `mpirun -np N dtrain train --backend mpi`.
void runMpiRank(runtime::TrainConfig c, bool workersGiven) {
  DTRAIN_CHECK_USAGE(comm::hasBackend("mpi"),
                     "--backend mpi: this dtrain was built without MPI (install libopenmpi-dev "
                     "and openmpi-bin, then reconfigure with -DDTRAIN_WITH_MPI=ON)");
  DTRAIN_CHECK_USAGE(underMpirun(), "--backend mpi runs one process per rank under mpirun: "
                     "mpirun -np N dtrain train --backend mpi ... (or use --backend local "
                     "--workers N)");
  std::unique_ptr<comm::Communicator> comm;
  try {
    comm = comm::makeCommunicator("mpi");
    const int servers = c.strategy == "ps" ? c.servers : 0;
    DTRAIN_CHECK_USAGE(comm->size() > servers, "--servers ", servers, " leaves no worker among mpirun's ",
                       comm->size(), " processes (mpirun -np S+W: the first S serve)");
    DTRAIN_CHECK_USAGE(!workersGiven || c.workers == comm->size() - servers, "--workers ", c.workers,
                       " does not match mpirun's ", comm->size(), " processes",
                       servers ? detail::concat(" minus ", servers, " servers") : std::string(),
                       " (with --backend mpi, mpirun -np sets the workers)");
    c.workers = comm->size() - servers;
    c.validate();
    runtime::Timeline timeline;
    comm->barrier();  // aligns the ranks' timeline clocks
    timeline.setOrigin(nowMicros());
    SharedRun shared;
    if (!c.timeline.empty()) shared.timeline = &timeline;
    std::optional<runtime::TrainResult> result = runRank(c, *comm, shared);
    if (!c.timeline.empty()) timeline.writeGathered(*comm, c.timeline);
    comm.reset();
    if (result) std::cout << resultLine(c, *result, c.workers, c.strategy, "mpi").dump() << std::endl;
    comm::shutdown(0);
  } catch (const std::exception& e) {
    // With several ranks this aborts the job at once (the others would wait for
    // their timeouts); with one, MPI is finalized and main prints the error.
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    comm.reset();
    comm::shutdown(usage ? 2 : 1, std::string("dtrain: error: ") + e.what());
    throw;
  }
}

void run(const TrainFlags& f, const CLI::App& sub) {
  runtime::TrainConfig c = f.config;
  auto given = [&sub](const char* flag) { return sub.count(flag) > 0; };
  if (given("--n-layer")) c.nLayer = f.nLayer;
  if (given("--n-head")) c.nHead = f.nHead;
  if (given("--n-embd")) c.nEmbd = f.nEmbd;
  if (given("--block-size")) c.blockSize = f.blockSize;
  if (given("--adam-betas")) std::tie(c.beta1, c.beta2) = parseBetas(f.adamBetas);
  if (f.momentum >= 0 || f.momentum != f.momentum) c.momentum = f.momentum;
  c.shuffle = !f.noShuffle;
  c.overlap = !f.noOverlap;
  for (const auto& t : f.stragglers) c.stragglerMs.insert(parseIndexValue<double>("--straggler", t));
  for (const auto& t : f.killWorkers) c.killWorker.insert(parseIndexValue<int64_t>("--kill-worker", t));
  for (const auto& t : f.killServers) c.killServer.insert(parseIndexValue<int64_t>("--kill-server", t));
  for (const auto& t : f.pauseWorkers)
    c.pauseWorker.insert(parseIndexValue<int64_t>("--pause-worker", t));
  using P = runtime::TrainConfig::Progress;
  c.progress = f.progress == "bar" ? P::Bar : f.progress == "lines" ? P::Lines
               : f.progress == "off" ? P::Off : P::Auto;
  // A compressor's flag without that compressor would be silently ignored.
  const std::pair<const char*, std::vector<std::string>> compressFlags[] = {
      {"--compress-bits", {"qsgd"}},
      {"--compress-ratio", {"topk", "randomk"}},
      {"--compress-rank", {"powersgd"}},
      {"--compress-start-step", {"powersgd"}},
      {"--compress-collective", {"onebit", "signsgd", "qsgd", "topk"}}};
  for (const auto& [flag, users] : compressFlags) {
    const bool applies = std::find(users.begin(), users.end(), c.compress) != users.end();
    std::string names = users[0];
    for (size_t i = 1; i < users.size(); ++i)
      names += (i + 1 == users.size() ? " or " : ", ") + users[i];
    DTRAIN_CHECK_USAGE(!given(flag) || applies, flag, " applies to --compress ", names,
                       " (got --compress ", c.compress, ")");
  }
  // Defaults that depend on the model (gpt: text data, the peer's AdamW settings).
  runtime::applyTaskDefaults(c, given);
  // A pipeline without --workers: one replica, one rank per stage.
  // A pipeline or tensor-parallel group without --workers: one replica.
  if (!f.workersGiven) c.workers = std::max(c.workers, c.pipelineStages * c.tensorParallel);
  // Under mpi the workers are known only once MPI is up (runMpiRank validates again).
  c.validate(c.backend != "mpi");
  runtime::resolveCheckpointFlags(c);  // --resume -> --load
  runtime::checkOutputPaths(c);        // before training, not after it
  // A pipeline cuts its stages' layers itself when --tensor-parallel is given too.
  if (c.pipelineStages > 1) c.strategy = "pipeline";
  else if (c.tensorParallel > 1) c.strategy = "tensor";
  const bool distributed = c.backend == "mpi" || c.workers > 1 || c.strategy == "allreduce";
  if (c.strategy.empty()) c.strategy = distributed ? "allreduce" : "single";
  if (runFederatedIfChosen(c, *f.federated, given)) return;  // federated learning
  if (c.backend == "mpi") return runMpiRank(c, f.workersGiven);
  if (c.strategy != "single") return runLocal(c);

  runtime::Trainer trainer(c, std::make_unique<parallel::SingleProcess>());
  runtime::Timeline timeline;
  timeline.setOrigin(nowMicros());
  if (!c.timeline.empty()) trainer.setTimeline(&timeline);
  runtime::TrainResult r = trainer.run();
  if (!c.timeline.empty()) timeline.write(c.timeline);
  std::cout << resultLine(c, r, 1, "single", "none").dump() << std::endl;
}

}  // namespace

void addTrainCommand(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  runtime::TrainConfig& c = flags->config;
  CLI::App* sub = app.add_subcommand("train", "Train a model (prints one JSON line at the end)");
  // A repeated flag takes its last value, as most command-line tools do.
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("--model", c.model, "Built-in model (gpt-*: byte-level language models)")
      ->check(CLI::IsMember(nn::registeredModelNames()))->capture_default_str();
  sub->add_option("--dataset", c.dataset,
                  "fashion-mnist or synthetic (classifiers), text (gpt-*: the default for them)")
      ->check(CLI::IsMember({"fashion-mnist", "synthetic", "text"}))->capture_default_str();
  sub->add_option("--text-file", c.textFile,
                  "--dataset text: train on this file's bytes (default: the King James Bible, kjv)");
  sub->add_option("--n-layer", flags->nLayer, "gpt: transformer blocks (overrides the preset)");
  sub->add_option("--n-head", flags->nHead, "gpt: attention heads (overrides the preset)");
  sub->add_option("--n-embd", flags->nEmbd, "gpt: embedding width (overrides the preset)");
  sub->add_option("--block-size", flags->blockSize, "gpt: context length (overrides the preset)");
  sub->add_option("--eval-batches", c.evalBatches,
                  "gpt: fixed validation batches (of --batch-size windows) per evaluation")
      ->capture_default_str();
  sub->add_option("--data-dir", c.dataDir, "Directory of the IDX files")->capture_default_str();
  sub->add_option("--synthetic-size", c.syntheticSize, "Training samples of --dataset synthetic")
      ->capture_default_str();
  sub->add_option("--epochs", c.epochs, "Passes over the training set")->capture_default_str();
  sub->add_option("--max-steps", c.maxSteps,
                  "Stop when the global step count reaches N (0: no limit; counts resumed steps)")
      ->capture_default_str();
  sub->add_option("--batch-size", c.batchSize, "Samples per step (per worker)")->capture_default_str();
  sub->add_option("--optimizer", c.optimizer, "sgd, adam, adamw, adagrad or lars")
      ->check(CLI::IsMember(optim::optimizerNames()))->capture_default_str();
  sub->add_option("--lr", c.lr, "Learning rate")->capture_default_str();
  sub->add_option("--momentum", flags->momentum, "SGD momentum (default 0.9)");
  sub->add_flag("--nesterov", c.nesterov, "Nesterov momentum (SGD)");
  sub->add_option("--weight-decay", c.weightDecay, "L2 penalty (AdamW: decoupled; gpt default 0.1)")
      ->capture_default_str();
  sub->add_flag("--decay-2d-only,!--no-decay-2d-only", c.decay2dOnly,
                "Weight decay only for parameters with >= 2 dims, not biases or norm weights "
                "(nanoGPT's groups; default on for gpt models)");
  sub->add_option("--adam-betas", flags->adamBetas,
                  "adam, adamw: B1,B2 (default 0.9,0.999; gpt 0.9,0.95)");
  sub->add_option("--clip-grad-norm", c.clipGradNorm,
                  "Clip the global gradient norm to X (0: off; gpt default 1.0)")
      ->capture_default_str();
  sub->add_option("--schedule", c.schedule, "constant, step or cosine")->capture_default_str();
  sub->add_option("--step-size", c.stepSize, "Steps between decays of --schedule step (default: one epoch)");
  sub->add_option("--gamma", c.gamma, "Decay factor of --schedule step")->capture_default_str();
  sub->add_option("--warmup-steps", c.warmupSteps, "Linear learning-rate warmup steps")
      ->capture_default_str();
  sub->add_option("--seed", c.seed, "Seed of initialization and shuffling")->capture_default_str();
  sub->add_option("--threads", c.threads, "Intra-op threads (BLAS and kernels)")->capture_default_str();
  sub->add_option("--precision", c.precision,
                  "Linear layers' matrix products: fp32, or bf16 (bf16 operands, fp32 "
                  "accumulation; parameters, gradients and optimizer state stay fp32)")
      ->capture_default_str();
  sub->add_option("--gemm", c.gemm,
                  "Matrix products on: auto (oneDNN or OpenBLAS, whichever is faster for the "
                  "CPU and shape), onednn, openblas")
      ->capture_default_str();
  sub->add_flag("--no-shuffle", flags->noShuffle, "Take batches in file order");
  sub->add_option("--prefetch", c.prefetch, "Batches loaded ahead on a background thread (0: none)")
      ->capture_default_str();
  sub->add_option("--save", c.save, "Write a safetensors checkpoint at the end");
  sub->add_option("--load", c.load, "Start from a safetensors checkpoint (dtrain's or a PyTorch state_dict)");
  // Periodic checkpoints and resuming (runtime/CheckpointDir.h).
  sub->add_option("--checkpoint-every", c.checkpointEvery,
                  "Write a checkpoint every N steps into --checkpoint-dir (0: off)")
      ->capture_default_str();
  sub->add_option("--checkpoint-dir", c.checkpointDir,
                  "Directory of the periodic checkpoints (step-<N>.safetensors)");
  sub->add_option("--keep-checkpoints", c.keepCheckpoints, "Periodic checkpoints kept (the newest)")
      ->capture_default_str();
  sub->add_option("--resume", c.resume,
                  "auto (the newest valid checkpoint in --checkpoint-dir; none: start fresh) or "
                  "a checkpoint file: go on from its step, data position and optimizer state");
  sub->add_option("--metrics", c.metrics, "Write one JSON object per logged step to FILE");
  sub->add_flag("--eval-deferred", c.evalDeferred,
                "With --eval-every: copy the parameters then and evaluate the copies after training "
                "(time-to-accuracy runs: evaluating never pauses one worker while others train)");
  sub->add_option("--eval-every", c.evalEvery, "Evaluate on the test set every N steps (0: at the end only)")
      ->capture_default_str();
  sub->add_option("--log-every", c.logEvery, "Steps between log lines and metrics records")
      ->capture_default_str();
  sub->add_option("--progress", flags->progress, "auto (bar on a terminal), bar, lines or off")
      ->check(CLI::IsMember({"auto", "bar", "lines", "off"}))->capture_default_str();
  // Distributed training (README: "Data parallel training").
  sub->add_option("--workers", c.workers,
                  "Workers (local backend: ranks as threads; mpi: must match mpirun -np)")
      ->capture_default_str()
      ->each([flags](const std::string&) { flags->workersGiven = true; });
  sub->add_option("--backend", c.backend, "local (threads) or mpi (under mpirun)")
      ->capture_default_str();
  sub->add_option("--strategy", c.strategy,
                  "allreduce (default with more than one worker), ps (parameter servers), "
                  "hogwild or single");
  sub->add_option("--fusion-mb", c.fusionMb, "Fusion bucket size in MiB (allreduce)")
      ->capture_default_str();
  // ZeRO (issue 14).
  sub->add_option("--zero", c.zero,
                  "ZeRO stage on the allreduce strategy: 1 shards the optimizer state, 2 also "
                  "the gradients, 3 also the parameters (0: off); 1 and 2 also on the "
                  "data-parallel replicas of --pipeline-stages and --tensor-parallel")
      ->capture_default_str();
  sub->add_option("--offload", c.offload,
                  "Keep on disk between uses: none, optimizer (its state) or params (with "
                  "--zero 3, the parameter shards too)")
      ->capture_default_str();
  sub->add_option("--offload-dir", c.offloadDir,
                  "Directory for --offload's (unnamed) file (default: <cache dir>/offload)");
  sub->add_flag("--no-overlap", flags->noOverlap,
                "Allreduce only after the whole backward (for comparison)");
  sub->add_option("--allreduce-algo", c.allreduceAlgo, "auto, ring, rhd, tree, hier, shm or native (mpi)")
      ->capture_default_str();
  sub->add_option("--accumulate", c.accumulate,
                  "Micro-steps of --batch-size per optimizer step (gradient accumulation)")
      ->capture_default_str();
  sub->add_option("--compress", c.compress,
                  "Gradient compression (allreduce; ps pushes: the allgather ones and the "
                  "casts): " + parallel::compress::describeCompressors())
      ->capture_default_str();
  sub->add_option("--compress-bits", c.compressBits, "qsgd: bits per level (2^b - 1 levels per chunk)")
      ->capture_default_str();
  sub->add_option("--compress-ratio", c.compressRatio, "topk, randomk: fraction of the values sent")
      ->capture_default_str();
  sub->add_option("--compress-rank", c.compressRank, "powersgd: rank of the P/Q factors")
      ->capture_default_str();
  sub->add_option("--compress-start-step", c.compressStartStep,
                  "powersgd: steps of plain allreduce before compressing")
      ->capture_default_str();
  sub->add_option("--compress-collective", c.compressCollective,
                  "onebit, signsgd, qsgd, topk: allgather (every message to every rank) or "
                  "two-stage (compressed reduce-scatter + allgather, 1-bit Adam's)")
      ->capture_default_str();
  sub->add_flag("--scale-lr", c.scaleLr, "Linear scaling rule: multiply --lr by the workers");
  sub->add_option("--timeline", c.timeline, "Write a Chrome trace-event JSON timeline to FILE");
  // Memory: activation recomputation and LoRA (README: "LoRA and activation recomputation").
  sub->add_option("--recompute", c.recompute,
                  "Activation recomputation: none, blocks (each transformer block / layer) or all "
                  "(each block's sub-layers)")
      ->capture_default_str();
  sub->add_option("--lora-rank", c.loraRank,
                  "LoRA: train rank-R adapters of the targeted Linear layers, everything else frozen");
  sub->add_option("--lora-alpha", c.loraAlpha, "LoRA: scale alpha (updates are alpha/R x B A; default 8)");
  sub->add_option("--lora-targets", c.loraTargets,
                  "LoRA: attn, mlp or attn,mlp (default: every target the model has)");
  sub->add_option("--save-adapters", c.saveAdapters, "LoRA: write the adapters alone to FILE at the end");
  sub->add_option("--load-adapters", c.loadAdapters, "LoRA: start from adapters saved with --save-adapters");
  // Parameter servers (README: "Parameter servers").
  sub->add_option("--servers", c.servers, "ps: server ranks (local: threads; mpi: the first S of -np)")
      ->capture_default_str();
  sub->add_option("--consistency", c.consistency, "ps: sync (BSP), async (Downpour) or ssp")
      ->capture_default_str();
  sub->add_option("--staleness", c.staleness, "ps ssp: steps a worker may run ahead of the slowest")
      ->capture_default_str();
  sub->add_option("--backup-workers", c.backupWorkers,
                  "ps sync: each step uses the first W-b gradients and drops the b late ones")
      ->capture_default_str();
  sub->add_option("--push-every", c.pushEvery, "ps async: steps of gradients accumulated per push")
      ->capture_default_str();
  sub->add_option("--fetch-every", c.fetchEvery,
                  "ps async, ssp eager: steps between parameter fetches")
      ->capture_default_str();
  sub->add_option("--ssp-reads", c.sspReads,
                  "ps ssp: eager (fetch every --fetch-every steps, block only past the bound) "
                  "or lazy (fetch only when the cache is too stale)")
      ->capture_default_str();
  sub->add_option("--ps-timeout", c.psTimeoutS,
                  "ps: seconds without a message or heartbeat after which a peer is declared dead")
      ->capture_default_str();
  // Stragglers and fault injection (comparisons on one machine).
  sub->add_option("--straggler", flags->stragglers,
                  "WORKER:MS: worker WORKER sleeps MS ms more every step (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--random-delay", c.randomDelayMs,
                  "Every worker sleeps a random delay per step (exponential, mean MS ms)")
      ->capture_default_str();
  sub->add_option("--kill-worker", flags->killWorkers,
                  "ps: WORKER:STEP: that worker stops answering at STEP (fault injection)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--pause-worker", flags->pauseWorkers,
                  "ps: WORKER:STEP: that worker goes silent at STEP until every server declared "
                  "it dead, then carries on (fault injection: re-admission)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--kill-server", flags->killServers,
                  "ps: SERVER:N: that server stops answering after N updates (fault injection)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // Pipeline parallelism (README "Pipeline parallelism"; parallel/pipeline/).
  sub->add_option("--pipeline-stages", c.pipelineStages,
                  "Cut the model into P pipeline stages (workers = data-parallel replicas x P; "
                  "default workers P)")
      ->capture_default_str();
  sub->add_option("--micro-batches", c.microBatches,
                  "pipeline: micro-batches per step (--batch-size must divide by it)")
      ->capture_default_str();
  sub->add_option("--pipeline-schedule", c.pipelineSchedule, "pipeline: gpipe or 1f1b")
      ->capture_default_str();
  sub->add_option("--virtual-stages", c.virtualStages,
                  "pipeline: model chunks per stage, v > 1 interleaves 1f1b (Megatron; bubble / v, "
                  "--micro-batches a multiple of P)")
      ->capture_default_str();
  sub->add_option("--pipeline-split", c.pipelineSplit,
                  "pipeline: first layer of stages 1..P-1 (of chunks 1..P*v-1 with "
                  "--virtual-stages), e.g. 2,4 (default: balanced by measured per-layer time)")
      ->delimiter(',');
  sub->add_option("--placement", c.placement,
                  "pack (a pipeline's stages or a tensor-parallel group on neighbouring ranks) or "
                  "spread (replicas first)")
      ->capture_default_str();
  // Tensor parallelism (README "Tensor parallelism"; parallel/tensor/).
  sub->add_option("--tensor-parallel-style", c.tensorParallelStyle,
                  "megatron (a group's ranks on the same samples) or krizhevsky (mlp, lenet: the "
                  "layers below the cut data-parallel in the group, the cut ones on its gathered "
                  "batch: 'one weird trick')")
      ->capture_default_str();
  sub->add_option("--tensor-parallel", c.tensorParallel,
                  "Cut the model's layers across T ranks, Megatron-style (workers = data-parallel "
                  "replicas x T; default workers T)")
      ->capture_default_str();
  flags->federated = addFederatedFlags(sub);  // federated learning (cli/FederatedFlags.cpp)
  sub->callback([flags, sub] { run(*flags, *sub); });
}

}  // namespace dtrain::cli
