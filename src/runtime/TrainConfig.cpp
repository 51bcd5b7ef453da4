#include "runtime/TrainConfig.h"

#include <cmath>
#include <string>

#include "comm/Types.h"
#include "autograd/Precision.h"
#include "core/Error.h"
#include "runtime/LoraSetup.h"
#include "runtime/Trainer.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::runtime {

void TrainConfig::validate(bool workersKnown) const {
  DTRAIN_CHECK_USAGE(batchSize > 0, "--batch-size must be positive (got ", batchSize, ")");
  DTRAIN_CHECK_USAGE(epochs > 0, "--epochs must be positive (got ", epochs, ")");
  DTRAIN_CHECK_USAGE(maxSteps >= 0, "--max-steps must be >= 0 (got ", maxSteps, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(lr) && lr > 0, "--lr must be a positive finite number (got ",
                     lr, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(weightDecay) && weightDecay >= 0,
                     "--weight-decay must be a finite number >= 0 (got ", weightDecay, ")");
  DTRAIN_CHECK_USAGE(threads >= 1 && threads <= 1024, "--threads must be in [1, 1024] (got ",
                     threads, ")");
  kernels::parseGemmBackend(gemm);  // these throw a UsageError naming the choices
  autograd::parsePrecision(precision);
  DTRAIN_CHECK_USAGE(evalEvery >= 0, "--eval-every must be >= 0 (got ", evalEvery, ")");
  DTRAIN_CHECK_USAGE(logEvery > 0, "--log-every must be positive (got ", logEvery, ")");
  DTRAIN_CHECK_USAGE(prefetch >= 0, "--prefetch must be >= 0 (got ", prefetch, ")");
  DTRAIN_CHECK_USAGE(syntheticSize > 0, "--synthetic-size must be positive (got ", syntheticSize,
                     ")");
  DTRAIN_CHECK_USAGE(dataset == "fashion-mnist" || dataset == "synthetic" || dataset == "text" ||
                         dataset == "idx" || dataset == "npy",
                     "unknown --dataset '", dataset,
                     "' (known: fashion-mnist, synthetic, idx, npy, text)");
  validateMemoryOptions(*this);  // --recompute, --lora-* (runtime/LoraSetup.h)
  DTRAIN_CHECK_USAGE(evalBatches > 0, "--eval-batches must be positive (got ", evalBatches, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(clipGradNorm) && clipGradNorm >= 0,
                     "--clip-grad-norm must be a finite number >= 0 (got ", clipGradNorm, ")");
  // Hogwild! (and ps async/ssp) clip each worker's own gradient before its
  // update: every update is one SGD step, clipped as a single process clips its
  // steps. Sync parameter servers clip the mean by their combined norm.
  DTRAIN_CHECK_USAGE((!beta1 && !beta2) || optimizer == "adam" || optimizer == "adamw",
                     "--adam-betas applies to --optimizer adam and adamw (not ", optimizer, ")");
  DTRAIN_CHECK_USAGE(warmupSteps >= 0, "--warmup-steps must be >= 0 (got ", warmupSteps, ")");
  DTRAIN_CHECK_USAGE(workers >= 1, "--workers must be >= 1 (got ", workers, ")");
  // Periodic checkpoints and --resume (runtime/CheckpointDir.h).
  DTRAIN_CHECK_USAGE(checkpointEvery >= 0, "--checkpoint-every must be >= 0 (got ", checkpointEvery, ")");
  DTRAIN_CHECK_USAGE(checkpointEvery == 0 || !checkpointDir.empty(),
                     "--checkpoint-every needs --checkpoint-dir DIR");
  DTRAIN_CHECK_USAGE(keepCheckpoints >= 1, "--keep-checkpoints must be >= 1 (got ", keepCheckpoints, ")");
  DTRAIN_CHECK_USAGE(resume != "auto" || !checkpointDir.empty(),
                     "--resume auto needs --checkpoint-dir DIR (where to look)");
  DTRAIN_CHECK_USAGE(resume.empty() || load.empty(),
                     "--resume and --load both name a checkpoint: give one");
  DTRAIN_CHECK_USAGE(checkpointEvery == 0 || pipelineStages * tensorParallel == 1 || compress == "none",
                     "--checkpoint-every does not combine with ",
                     pipelineStages > 1 ? "--pipeline-stages" : "--tensor-parallel",
                     " and --compress yet (the compressors' per-rank residuals would not be saved)");
  DTRAIN_CHECK_USAGE(checkpointEvery == 0 || strategy.empty() || strategy == "single" ||
                         strategy == "allreduce" || strategy == "tensor" || strategy == "pipeline",
                     "--checkpoint-every needs the single, allreduce, pipeline or tensor strategy (not yet --strategy ",
                     strategy, ": its state is not on one rank between steps)");
  DTRAIN_CHECK_USAGE(strategy.empty() || strategy == "single" || strategy == "allreduce" ||
                         strategy == "ps" || strategy == "hogwild" ||
                         strategy == "fedavg" ||  // federated learning (src/federated)
                         (strategy == "pipeline" && pipelineStages > 1) ||
                         (strategy == "tensor" && tensorParallel > 1),
                     "unknown --strategy '", strategy,
                     "' (known: allreduce, ps, hogwild, single, fedavg)");
  DTRAIN_CHECK_USAGE(backend == "local" || backend == "mpi", "unknown --backend '", backend,
                     "' (known: local, mpi)");
  DTRAIN_CHECK_USAGE(!(strategy == "single" && (workers > 1 || backend == "mpi")),
                     "--strategy single runs one process with one worker; use --strategy "
                     "allreduce with --workers ", workers, " or --backend mpi");
  DTRAIN_CHECK_USAGE(std::isfinite(fusionMb) && fusionMb > 0,
                     "--fusion-mb must be a positive number (got ", fusionMb, ")");
  parallel::compress::validate(compressOptions(*this));
  // --compress and --zero modify the allreduce strategy (chosen by default for
  // more than one worker): `what` names the flag in the message.
  auto checkAllreduceOnly = [this](const std::string& what, const char* notTo) {
    const bool allreduce =
        strategy == "allreduce" || (strategy.empty() && (workers > 1 || backend == "mpi"));
    DTRAIN_CHECK_USAGE(allreduce, what, " applies to the allreduce strategy only",
                       strategy.empty() || strategy == "single"
                           ? std::string(" (this run has one worker: add --workers N)")
                           : std::string(" (") + notTo + " --strategy " + strategy + ")");
  };
  // ... or the data-parallel dimension of a pipeline or tensor-parallel mesh,
  // which needs replicas to combine.
  const int modelParallel = pipelineStages * tensorParallel;
  auto checkDataParallelDimension = [&](const std::string& what, const char* notTo) {
    if (modelParallel == 1) return checkAllreduceOnly(what, notTo);
    const char* mesh = pipelineStages > 1 ? "--pipeline-stages" : "--tensor-parallel";
    DTRAIN_CHECK_USAGE(!workersKnown || workers > modelParallel, what, " with ", mesh,
                       " applies across data-parallel replicas, and this run has one (--workers ",
                       workers, " = ", modelParallel, " model-parallel ranks): use --workers ",
                       2 * modelParallel, " or more");
  };
  // Parameter servers compress their pushes with the compressors that have a
  // point-to-point form (parallel/ps/PushCodec.h).
  if (compress != "none" && strategy == "ps") {
    parallel::compress::requireMessageCodec(compress);
    DTRAIN_CHECK_USAGE(compressCollective == "allgather",
                       "--compress-collective applies to allreduce (ps pushes go to one server)");
  } else if (compress != "none") {
    checkDataParallelDimension("--compress " + compress, "not yet to");
  }
  // ZeRO: the allreduce strategy, uncompressed, only (parallel/zero/), also as
  // the dp dimension of a pipeline or tensor-parallel mesh.
  if (zero != 0) {
    DTRAIN_CHECK_USAGE(zero >= 1 && zero <= 3, "--zero ", zero,
                       ": the stages are 1 (optimizer state), 2 (and gradients) and 3 (and "
                       "parameters)");
    // Stage 3 would gather each layer's parameters around its use inside a
    // stage's schedule or a group's f and g; DeepSpeed refuses ZeRO-2/3 with
    // pipelines for the same reason. Stages 1 and 2 shard the dp dimension.
    DTRAIN_CHECK_USAGE(zero <= 2 || modelParallel == 1, "--zero 3 does not combine with ",
                       pipelineStages > 1 ? "--pipeline-stages" : "--tensor-parallel",
                       " (stages 1 and 2 do: they shard across the data-parallel replicas)");
    checkDataParallelDimension("--zero", "not to");
    DTRAIN_CHECK_USAGE(compress == "none" || compress == "fp16" || compress == "bf16",
                       "--zero cannot be combined with --compress ", compress,
                       " yet (fp16 and bf16 do: the gradients are reduce-scattered in 16 bits)");
    DTRAIN_CHECK_USAGE(compress == "none" || zero <= 2,
                       "--zero 3 does not combine with --compress yet (stages 1 and 2 reduce-scatter "
                       "in fp16 or bf16)");
    DTRAIN_CHECK_USAGE(optimizer != "lars",
                       "--zero does not support --optimizer lars (its trust ratio needs whole "
                       "tensors; use sgd, adam, adamw or adagrad)");
  }
  DTRAIN_CHECK_USAGE(offload == "none" || offload == "optimizer" || offload == "params",
                     "unknown --offload '", offload, "' (known: none, optimizer, params)");
  if (offload != "none") {
    const bool allreduce = strategy.empty() || strategy == "single" || strategy == "allreduce";
    DTRAIN_CHECK_USAGE(allreduce, "--offload applies to one worker and to the allreduce strategy "
                       "(not to --strategy ", strategy, ")");
    DTRAIN_CHECK_USAGE(pipelineStages <= 1 && tensorParallel <= 1,
                       "--offload cannot be combined with --pipeline-stages or --tensor-parallel yet");
    DTRAIN_CHECK_USAGE(offload != "params" || zero == 3,
                       "--offload params needs --zero 3 (the parameter shards are what it offloads)");
  }
  DTRAIN_CHECK_USAGE(offload != "none" || offloadDir.empty(), "--offload-dir needs --offload");
  DTRAIN_CHECK_USAGE(accumulate >= 1, "--accumulate must be >= 1 (got ", accumulate, ")");
  DTRAIN_CHECK_USAGE(servers >= 1 && servers <= 4096, "--servers must be in [1, 4096] (got ",
                     servers, ")");
  DTRAIN_CHECK_USAGE(workers <= 4096, "--workers must be <= 4096 (got ", workers, ")");
  DTRAIN_CHECK_USAGE(consistency == "sync" || consistency == "async" || consistency == "ssp",
                     "unknown --consistency '", consistency, "' (known: sync, async, ssp)");
  DTRAIN_CHECK_USAGE(staleness >= 0, "--staleness must be >= 0 (got ", staleness, ")");
  DTRAIN_CHECK_USAGE(backupWorkers >= 0 && (!workersKnown || backupWorkers < workers), "--backup-workers must be in [0, ",
                     workers - 1, "] with --workers ", workers, " (got ", backupWorkers, ")");
  DTRAIN_CHECK_USAGE(pushEvery >= 1, "--push-every must be >= 1 (got ", pushEvery, ")");
  DTRAIN_CHECK_USAGE(fetchEvery >= 1, "--fetch-every must be >= 1 (got ", fetchEvery, ")");
  DTRAIN_CHECK_USAGE(sspReads == "eager" || sspReads == "lazy", "unknown --ssp-reads '", sspReads,
                     "' (known: eager, lazy)");
  DTRAIN_CHECK_USAGE(std::isfinite(psTimeoutS) && psTimeoutS > 0,
                     "--ps-timeout must be a positive number of seconds (got ", psTimeoutS, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(randomDelayMs) && randomDelayMs >= 0,
                     "--random-delay must be >= 0 ms (got ", randomDelayMs, ")");
  for (const auto& [w, ms] : stragglerMs) {
    DTRAIN_CHECK_USAGE(w >= 0 && (!workersKnown || w < workers), "--straggler ", w, ":", ms, ": worker ", w,
                       " does not exist (workers are 0..", workers - 1, ")");
    DTRAIN_CHECK_USAGE(std::isfinite(ms) && ms >= 0, "--straggler ", w, ":", ms,
                       ": the delay must be >= 0 ms");
  }
  for (const auto& [w, step] : killWorker) {
    DTRAIN_CHECK_USAGE(strategy == "ps", "--kill-worker applies to --strategy ps");
    DTRAIN_CHECK_USAGE(w >= 1 && (!workersKnown || w < workers), "--kill-worker ", w, ":", step, ": worker ", w,
                       " cannot be killed (workers are 0..", workers - 1,
                       "; worker 0 reports and is never killed)");
    DTRAIN_CHECK_USAGE(step >= 0, "--kill-worker ", w, ":", step, ": the step must be >= 0");
  }
  for (const auto& [w, step] : pauseWorker) {
    DTRAIN_CHECK_USAGE(strategy == "ps", "--pause-worker applies to --strategy ps");
    DTRAIN_CHECK_USAGE(w >= 0 && (!workersKnown || w < workers), "--pause-worker ", w, ":", step,
                       ": worker ", w, " does not exist (workers are 0..", workers - 1, ")");
    DTRAIN_CHECK_USAGE(step >= 0, "--pause-worker ", w, ":", step, ": the step must be >= 0");
  }
  for (const auto& [s, updates] : killServer) {
    DTRAIN_CHECK_USAGE(strategy == "ps", "--kill-server applies to --strategy ps");
    DTRAIN_CHECK_USAGE(s >= 0 && s < servers, "--kill-server ", s, ":", updates, ": server ", s,
                       " does not exist (servers are 0..", servers - 1, ")");
    DTRAIN_CHECK_USAGE(updates >= 0, "--kill-server ", s, ":", updates,
                       ": the update count must be >= 0");
  }
  if (strategy == "ps") {
    DTRAIN_CHECK_USAGE(backupWorkers == 0 || consistency == "sync",
                       "--backup-workers applies to --consistency sync");
    DTRAIN_CHECK_USAGE(staleness == 0 || consistency == "ssp",
                       "--staleness applies to --consistency ssp");
    DTRAIN_CHECK_USAGE(pushEvery == 1 || consistency == "async",
                       "--push-every applies to --consistency async");
    DTRAIN_CHECK_USAGE(fetchEvery == 1 || consistency == "async" ||
                           (consistency == "ssp" && sspReads == "eager"),
                       "--fetch-every applies to --consistency async and ssp with --ssp-reads eager");
    DTRAIN_CHECK_USAGE(sspReads == "eager" || consistency == "ssp",
                       "--ssp-reads applies to --consistency ssp");
    DTRAIN_CHECK_USAGE(optimizer != "lars", "--optimizer lars needs whole-layer norms, which "
                       "sharded servers do not have; use sgd, adam, adamw or adagrad with --strategy ps");
    DTRAIN_CHECK_USAGE(accumulate == 1, "--accumulate applies to --strategy allreduce "
                       "(parameter servers accumulate with --push-every)");
  }
  if (strategy == "hogwild") {
    DTRAIN_CHECK_USAGE(backend == "local", "--strategy hogwild shares one parameter set between "
                       "threads of one process: use --backend local");
    DTRAIN_CHECK_USAGE(accumulate == 1, "--accumulate applies to --strategy allreduce");
  }
  // Pipeline parallelism (--pipeline-stages; the strategy "pipeline" once resolved).
  DTRAIN_CHECK_USAGE(pipelineStages >= 1, "--pipeline-stages must be >= 1 (got ", pipelineStages, ")");
  DTRAIN_CHECK_USAGE(microBatches >= 1, "--micro-batches must be >= 1 (got ", microBatches, ")");
  DTRAIN_CHECK_USAGE(pipelineSchedule == "gpipe" || pipelineSchedule == "1f1b",
                     "unknown --pipeline-schedule '", pipelineSchedule, "' (known: gpipe, 1f1b)");
  DTRAIN_CHECK_USAGE(placement == "pack" || placement == "spread", "unknown --placement '",
                     placement, "' (known: pack, spread)");
  if (pipelineStages > 1) {
    DTRAIN_CHECK_USAGE(strategy.empty() || strategy == "pipeline", "--pipeline-stages runs its own "
                       "strategy (data parallel across pipelines); drop --strategy ", strategy);
    DTRAIN_CHECK_USAGE(!workersKnown || workers % (pipelineStages * tensorParallel) == 0, "--workers ",
                       workers, " is not a multiple of --pipeline-stages ", pipelineStages,
                       tensorParallel > 1 ? detail::concat(" x --tensor-parallel ", tensorParallel)
                                          : std::string(),
                       tensorParallel > 1 ? " (workers = data-parallel replicas x stages x tensor-parallel ranks)"
                                          : " (workers = data-parallel replicas x stages)");
    DTRAIN_CHECK_USAGE(batchSize % microBatches == 0, "--batch-size ", batchSize,
                       " is not divisible by --micro-batches ", microBatches);
    DTRAIN_CHECK_USAGE(accumulate == 1, "--accumulate does not combine with --pipeline-stages "
                       "(the pipeline's --micro-batches accumulate gradients)");
    DTRAIN_CHECK_USAGE(virtualStages >= 1, "--virtual-stages must be >= 1 (got ", virtualStages, ")");
    DTRAIN_CHECK_USAGE(virtualStages == 1 || pipelineSchedule == "1f1b",
                       "--virtual-stages interleaves the 1f1b schedule (not ", pipelineSchedule, ")");
    DTRAIN_CHECK_USAGE(virtualStages == 1 || microBatches % pipelineStages == 0,
                       "--virtual-stages needs --micro-batches a multiple of --pipeline-stages (",
                       microBatches, " micro-batches, ", pipelineStages, " stages)");
    const int chunks = pipelineStages * virtualStages;
    DTRAIN_CHECK_USAGE(pipelineSplit.empty() || static_cast<int>(pipelineSplit.size()) == chunks - 1,
                       "--pipeline-split needs ", chunks - 1, " cut points for ", chunks,
                       virtualStages > 1 ? " model chunks" : " stages", " (got ", pipelineSplit.size(), ")");
    for (size_t i = 0; i < pipelineSplit.size(); ++i)
      DTRAIN_CHECK_USAGE(pipelineSplit[i] >= 1 && (i == 0 || pipelineSplit[i] > pipelineSplit[i - 1]),
                         "--pipeline-split: cut points must be increasing layer indices >= 1");
  } else {
    DTRAIN_CHECK_USAGE(microBatches == 1 && pipelineSplit.empty() && virtualStages == 1,
                       "--micro-batches, --virtual-stages and --pipeline-split apply to "
                       "--pipeline-stages P > 1");
  }
  // Tensor parallelism (--tensor-parallel; the strategy "tensor" once resolved).
  DTRAIN_CHECK_USAGE(tensorParallel >= 1, "--tensor-parallel must be >= 1 (got ", tensorParallel, ")");
  DTRAIN_CHECK_USAGE(tensorParallelStyle == "megatron" || tensorParallelStyle == "krizhevsky",
                     "unknown --tensor-parallel-style '", tensorParallelStyle,
                     "' (known: megatron, krizhevsky)");
  DTRAIN_CHECK_USAGE(tensorParallelStyle == "megatron" || (tensorParallel > 1 && pipelineStages == 1),
                     "--tensor-parallel-style krizhevsky needs --tensor-parallel T > 1 without "
                     "--pipeline-stages");
  if (tensorParallel > 1) {
    DTRAIN_CHECK_USAGE(strategy.empty() || strategy == "tensor" ||
                           (strategy == "pipeline" && pipelineStages > 1),
                       "--tensor-parallel runs its own strategy (data parallel across "
                       "tensor-parallel groups); drop --strategy ", strategy);
    DTRAIN_CHECK_USAGE(!workersKnown || workers % tensorParallel == 0, "--workers ", workers,
                       " is not a multiple of --tensor-parallel ", tensorParallel,
                       " (workers = data-parallel replicas x tensor-parallel ranks)");
  }
  try {
    comm::algorithmFromName(allreduceAlgo);
  } catch (const UsageError& e) {
    throw UsageError(std::string("--allreduce-algo: ") + e.what());
  }
}

}  // namespace dtrain::runtime
