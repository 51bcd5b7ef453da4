#pragma once
// Everything the trainer is configured by. Filled by the configuration schema
// (api/Schema.h: flags, TOML files), which owns each field's group, help, range
// and when it applies; validate() checks what spans several fields.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/OptionSet.h"

namespace dtrain::runtime {

struct TrainConfig {
  std::string model = "mlp";
  std::string dataset = "fashion-mnist";  // or "synthetic", "idx", "npy", "text" (language models)
  // Language models (docs/guide/language-models.md): the corpus (empty: kjv), the
  // architecture overrides of the gpt preset, the evaluation windows.
  std::string textFile;
  std::optional<int64_t> nLayer, nHead, nEmbd, blockSize;
  std::vector<int> mlpHidden;  // mlp's hidden widths (empty: 256,256)
  int64_t evalBatches = 20;
  std::string dataDir = "/usr/share/datasets/fashion-mnist";  // fashion-mnist, idx
  // The user's own data (--dataset npy, data/NpyDataset.h): .npy features [N, ...]
  // and labels [N]; without the test pair there is no test evaluation.
  std::string trainData, trainLabels, testData, testLabels;
  // Data handed over in memory (api::train; dataset "memory"): whether a test set was too.
  bool memoryTestSet = false;
  int64_t syntheticSize = 60000;
  int64_t epochs = 1;
  int64_t maxSteps = 0;  // 0: no limit (stop after `epochs`)
  int64_t batchSize = 64;  // per worker
  std::string optimizer = "sgd";
  double lr = 0.05;
  std::optional<double> momentum;  // sgd default 0.9 (as the PyTorch peer)
  bool nesterov = false;
  double weightDecay = 0.0;
  bool decay2dOnly = false;              // weight decay only for parameters with >= 2 dims
  std::optional<double> beta1, beta2;    // adam, adamw (--adam-betas)
  int64_t lbfgsHistory = 10;             // lbfgs: curvature pairs kept (--lbfgs-history)
  double clipGradNorm = 0;               // max global gradient norm; 0: no clipping
  std::string schedule = "constant";
  int64_t warmupSteps = 0;
  int64_t stepSize = 0;  // step schedule
  double gamma = 0.1;    // step schedule
  uint64_t seed = 0;
  int threads = 0;  // intra-op threads per rank; 0: auto (runtime/ThreadCount.h)
  std::string gemm = "auto";
  std::string precision = "fp32";  // of linear layers' products: fp32, bf16 (autograd/Precision.h)  // GEMM backend: auto, onednn, openblas (tensor/cpu/Blas.h)
  bool shuffle = true;
  int prefetch = 2;
  // Streamed datasets (--dataset shards; data/ShardStream.h): loader threads per rank,
  // the shuffle buffer's samples, and whether bad samples are counted and skipped.
  int loaderThreads = 1;
  int64_t shuffleBuffer = 1000;
  bool skipBadSamples = false;
  // Images (--dataset imagefolder, .jpg/.png shard members; data/ImageTransform.h): the
  // side S of the [3, S, S] input they are resized and cropped to, and --normalize's
  // "mean,std" (or three means, three stds).
  int64_t imageSize = 0;
  std::string normalize;
  std::string augment;  // training-set augmentation: "", "crop", "flip", "crop,flip" (data/Augment.h)
  std::string save, load, metrics;
  // Periodic checkpoints (runtime/CheckpointDir.h): every N steps into the
  // directory, the newest `keepCheckpoints` kept; resume: "auto" (the newest
  // valid one there) or a checkpoint's path, with its training state.
  int64_t checkpointEvery = 0;
  std::string checkpointDir;
  int keepCheckpoints = 3;
  std::string resume;
  int64_t evalEvery = 0;   // steps; 0: only at the end
  bool evalDeferred = false;  // snapshot every evalEvery steps, evaluate after training
  // A validation split (runtime/ClassificationData.cpp): this fraction of the training
  // set, drawn by --seed, is held out and evaluated as val_loss and val_accuracy.
  std::optional<double> valFraction;
  // Early stopping (runtime/EarlyStopping.h): stop once this many evaluations in a row
  // have not improved the metric (0: off); "" picks val_loss.
  int64_t earlyStopPatience = 0;
  std::string earlyStopMetric;
  int64_t logEvery = 100;  // steps between metric records / log lines
  int64_t evalBatch = 1000;
  enum class Progress { Auto, Bar, Lines, Off } progress = Progress::Auto;

  // Distributed training (docs/guide/data-parallelism.md).
  int workers = 1;                 // local backend: ranks as threads of this process
  std::string strategy = "";       // "" = allreduce when more than one worker, else single
  // The options of strategies that declare them in their own folder (their spec,
  // src/parallel/<name>/<Name>Spec.cpp): strategyOptions.get<GossipOptions>().
  OptionSet strategyOptions;
  std::string backend = "local";   // local or mpi (one process per rank under mpirun)
  // mpi: seconds a peer may send no heartbeat before a wait on it fails naming it
  // (a dead, stopped or cut-off process); 0 = comm::defaultPeerTimeout() (30 s).
  double commTimeoutS = 0;
  // Seconds one communication call may wait while every peer is alive (a stuck
  // peer) before it fails naming them (mpi: a watchdog aborts the job);
  // 0 = comm::defaultTimeout() (300 s).
  double callTimeoutS = 0;
  double fusionMb = 0.25;          // fusion bucket size (parallel::kDefaultFusionMb)
  bool overlap = true;             // allreduce buckets during backward
  bool syncBn = false;             // BatchNorm statistics over all replicas (SyncBatchNorm)
  std::string allreduceAlgo = "auto";
  int64_t accumulate = 1;          // micro-steps per optimizer step (gradient accumulation)
  bool scaleLr = false;            // linear scaling rule: lr x workers x accumulate
  std::string timeline;            // Chrome trace-event JSON output
  std::string tensorboard;         // directory of TensorBoard event files (the metrics' scalars)
  std::string machine;             // machine file: the result line adds the simulator's prediction
  // Gradient compression (allreduce strategy; parallel/compress/Compressor.h).
  std::string compress = "none";
  int compressBits = 4;            // qsgd
  double compressRatio = 0.01;     // topk, randomk
  int compressRank = 1;            // powersgd
  int64_t compressStartStep = 10;  // powersgd: plain allreduce steps first
  std::string compressCollective = "allgather";  // allgather compressors: or two-stage
  // Sufficient factor broadcasting (parallel/allreduce/SufficientFactors.h): off, on, auto.
  std::string sfb = "off";
  // ZeRO (parallel/zero/ZeroDataParallel.h): 0 off, 1, 2 or 3 on the allreduce strategy.
  int zero = 0;
  // Offload (core/Offload.h): none, optimizer (its state lives in a file on
  // disk between updates) or params (with --zero 3: the parameter shards too).
  std::string offload = "none";
  std::string offloadDir;  // empty: <cache dir>/offload

  // Pipeline parallelism (parallel/pipeline/, docs/guide/model-parallelism.md):
  // --pipeline-stages P > 1 runs the "pipeline" strategy on workers = dp x P ranks.
  int pipelineStages = 1;
  int64_t microBatches = 1;             // --batch-size cut into this many per step
  std::string pipelineSchedule = "1f1b";  // or gpipe
  int virtualStages = 1;                // > 1: interleaved 1F1B, this many model chunks per stage
  std::vector<int> pipelineSplit;       // first layer of stages 1..P-1; empty: balanced by time
  std::string placement = "pack";       // pack: a pipeline's stages on neighbouring ranks; spread
  // Tensor parallelism (parallel/tensor/, docs/guide/model-parallelism.md):
  // --tensor-parallel T > 1 runs the "tensor" strategy on workers = dp x T ranks.
  int tensorParallel = 1;
  // megatron: a group's ranks compute on the same samples; krizhevsky: the
  // layers below the cut data-parallel within the group ("one weird trick").
  std::string tensorParallelStyle = "megatron";
  // Local SGD and DiLoCo (parallel/localsgd/, docs/guide/local-sgd.md).

  // Memory: activation recomputation and LoRA (runtime/LoraSetup.h, docs/guide/memory.md).
  std::string recompute = "none";    // none, blocks, all (nn/RecomputeModes.h)
  std::optional<int64_t> loraRank;   // unset: no LoRA
  std::optional<double> loraAlpha;   // default 8 (peft)
  std::string loraTargets;           // "attn,mlp"; "": every target the model has
  std::string saveAdapters, loadAdapters;

  // Parameter servers (docs/guide/parameter-servers.md): ranks 0..servers-1 serve,
  // the next `workers` ranks train.
  int servers = 1;
  std::string consistency = "sync";  // sync (BSP), async (Downpour) or ssp
  int64_t staleness = 0;             // ssp: steps a worker may run ahead of the slowest
  int backupWorkers = 0;             // sync: gradients dropped per step (the last to arrive)
  int64_t pushEvery = 1;             // async: steps of gradients accumulated per push
  int64_t fetchEvery = 1;            // async, eager ssp: steps between parameter fetches
  std::string sspReads = "eager";    // ssp: eager (fetch every --fetch-every steps) or lazy
  double psTimeoutS = 60;            // silence (no message, no heartbeat) before a peer is dead

  // Stragglers and faults, for every strategy; keys are worker indices (0..workers-1).
  std::map<int, double> stragglerMs;  // fixed extra delay per step
  double randomDelayMs = 0;           // mean of an exponential extra delay per step, every worker
  std::map<int, int64_t> killWorker;  // worker -> step at which it stops answering
  std::map<int, int64_t> killServer;  // server -> updates after which it stops answering
  std::map<int, int64_t> pauseWorker; // worker -> step at which it goes silent until declared dead

  // Throws UsageError naming the flag on an invalid value. Under mpi the
  // workers are known only once MPI is up: workersKnown false skips the checks
  // that depend on their number (the rank validates again then).
  void validate(bool workersKnown = true) const;
  // --straggler's keys as worker indices 0..workers-1 (the strategies whose
  // entry says otherwise check them themselves: api::StrategyEntry::checkStragglers).
  void validateStragglers(bool workersKnown = true) const;
};

}  // namespace dtrain::runtime
