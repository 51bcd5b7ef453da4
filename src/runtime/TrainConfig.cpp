#include "runtime/TrainConfig.h"

#include <cmath>
#include <string>

#include "comm/CollectiveTypes.h"
#include "autograd/Precision.h"
#include "core/Error.h"
#include "optim/Factory.h"
#include "runtime/LoraSetup.h"
#include "runtime/Trainer.h"
#include "tensor/cpu/Blas.h"

namespace dtrain::runtime {

// The checks that span several fields; each field's own range and choices are
// the schema's (api/groups/), checked before this runs.
void TrainConfig::validate(bool workersKnown) const {
  kernels::parseGemmBackend(gemm);  // these throw a UsageError naming the choices
  autograd::parsePrecision(precision);
  validateMemoryOptions(*this);  // --recompute, --lora-* (runtime/LoraSetup.h)
  // Hogwild! (and ps async/ssp) clip each worker's own gradient before its
  // update: every update is one SGD step, clipped as a single process clips its
  // steps. Sync parameter servers clip the mean by their combined norm.
  DTRAIN_CHECK_USAGE((!beta1 && !beta2) || optimizer == "adam" || optimizer == "adamw" ||
                         optimizer == "lamb",
                     "--adam-betas applies to --optimizer adam, adamw and lamb (not ", optimizer, ")");
  // L-BFGS's line search re-evaluates the loss of the whole step's batch
  // (optim/Lbfgs.h): one process, or the sandblaster coordinator whose workers
  // compute that batch's gradient (parallel/sandblaster/).
  if (optimizer == "lbfgs") {
    DTRAIN_CHECK_USAGE(strategy.empty() || strategy == "single" || strategy == "sandblaster",
                       "--optimizer lbfgs runs with --strategy single or sandblaster (its line "
                       "search re-evaluates the whole batch's loss; --strategy ", strategy,
                       " updates replicas or shards on their own)");
    DTRAIN_CHECK_USAGE(clipGradNorm == 0, "--clip-grad-norm does not apply to --optimizer lbfgs "
                       "(its line search chooses the step length)");
  }
  // Periodic checkpoints and --resume (runtime/CheckpointDir.h).
  DTRAIN_CHECK_USAGE(checkpointEvery == 0 || !checkpointDir.empty(),
                     "--checkpoint-every needs --checkpoint-dir DIR");
  DTRAIN_CHECK_USAGE(resume != "auto" || !checkpointDir.empty(),
                     "--resume auto needs --checkpoint-dir DIR (where to look)");
  DTRAIN_CHECK_USAGE(resume.empty() || load.empty(),
                     "--resume and --load both name a checkpoint: give one");
  DTRAIN_CHECK_USAGE(checkpointEvery == 0 || pipelineStages * tensorParallel == 1 || compress == "none",
                     "--checkpoint-every does not combine with ",
                     pipelineStages > 1 ? "--pipeline-stages" : "--tensor-parallel",
                     " and --compress yet (the compressors' per-rank residuals would not be saved)");
  parallel::compress::validate(compressOptions(*this));
  // --compress and --zero act on data parallelism: the strategies that have
  // none do not read them (api/StrategyRegistry.cpp); in a pipeline or
  // tensor-parallel mesh, on its data-parallel dimension, which needs replicas.
  const int modelParallel = pipelineStages * tensorParallel;
  auto checkDataParallelDimension = [&](const std::string& what) {
    if (modelParallel == 1) return;
    const char* mesh = pipelineStages > 1 ? "--pipeline-stages" : "--tensor-parallel";
    DTRAIN_CHECK_USAGE(!workersKnown || workers > modelParallel, what, " with ", mesh,
                       " applies across data-parallel replicas, and this run has one (--workers ",
                       workers, " = ", modelParallel, " model-parallel ranks): use --workers ",
                       2 * modelParallel, " or more");
  };
  if (compress != "none") checkDataParallelDimension("--compress " + compress);

  // ZeRO: the allreduce strategy, uncompressed, only (parallel/zero/), also as
  // the dp dimension of a pipeline or tensor-parallel mesh.
  if (zero != 0) {
      // Stage 3 would gather each layer's parameters around its use inside a
    // stage's schedule or a group's f and g; DeepSpeed refuses ZeRO-2/3 with
    // pipelines for the same reason. Stages 1 and 2 shard the dp dimension.
    DTRAIN_CHECK_USAGE(zero <= 2 || modelParallel == 1, "--zero 3 does not combine with ",
                       pipelineStages > 1 ? "--pipeline-stages" : "--tensor-parallel",
                       " (stages 1 and 2 do: they shard across the data-parallel replicas)");
    checkDataParallelDimension("--zero");
    DTRAIN_CHECK_USAGE(compress == "none" || compress == "fp16" || compress == "bf16",
                       "--zero cannot be combined with --compress ", compress,
                       " yet (fp16 and bf16 do: the gradients are reduce-scattered in 16 bits)");
    DTRAIN_CHECK_USAGE(compress == "none" || zero <= 2,
                       "--zero 3 does not combine with --compress yet (stages 1 and 2 reduce-scatter "
                       "in fp16 or bf16)");
    // LARS/LAMB: the pieces' partial norms are summed over the ranks (ZeRO's shard optimizer).
    DTRAIN_CHECK_USAGE(!optim::needsWholeLayerNorms(optimizer) || offload != "optimizer",
                       "--zero with --optimizer ", optimizer, " cannot --offload optimizer yet (its "
                       "two passes over the state per step)");
  }
  if (offload != "none") {
    DTRAIN_CHECK_USAGE(pipelineStages <= 1 && tensorParallel <= 1,
                       "--offload cannot be combined with --pipeline-stages or --tensor-parallel yet");
    DTRAIN_CHECK_USAGE(offload != "params" || zero == 3,
                       "--offload params needs --zero 3 (the parameter shards are what it offloads)");
  }
  DTRAIN_CHECK_USAGE(offload != "none" || offloadDir.empty(), "--offload-dir needs --offload");
  DTRAIN_CHECK_USAGE(backupWorkers >= 0 && (!workersKnown || backupWorkers < workers), "--backup-workers must be in [0, ",
                     workers - 1, "] with --workers ", workers, " (got ", backupWorkers, ")");
  for (const auto& [w, step] : killWorker) {
    DTRAIN_CHECK_USAGE(w >= 1 && (!workersKnown || w < workers), "--kill-worker ", w, ":", step, ": worker ", w,
                       " cannot be killed (workers are 0..", workers - 1,
                       "; worker 0 reports and is never killed)");
    DTRAIN_CHECK_USAGE(step >= 0, "--kill-worker ", w, ":", step, ": the step must be >= 0");
  }
  for (const auto& [w, step] : pauseWorker) {
    DTRAIN_CHECK_USAGE(w >= 0 && (!workersKnown || w < workers), "--pause-worker ", w, ":", step,
                       ": worker ", w, " does not exist (workers are 0..", workers - 1, ")");
    DTRAIN_CHECK_USAGE(step >= 0, "--pause-worker ", w, ":", step, ": the step must be >= 0");
  }
  for (const auto& [s, updates] : killServer) {
    DTRAIN_CHECK_USAGE(s >= 0 && s < servers, "--kill-server ", s, ":", updates, ": server ", s,
                       " does not exist (servers are 0..", servers - 1, ")");
    DTRAIN_CHECK_USAGE(updates >= 0, "--kill-server ", s, ":", updates,
                       ": the update count must be >= 0");
  }
  // Pipeline parallelism (--pipeline-stages; the strategy "pipeline" once resolved).
  if (pipelineStages > 1) {
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
  DTRAIN_CHECK_USAGE(tensorParallelStyle == "megatron" || (tensorParallel > 1 && pipelineStages == 1),
                     "--tensor-parallel-style krizhevsky needs --tensor-parallel T > 1 without "
                     "--pipeline-stages");
  if (tensorParallel > 1) {
    DTRAIN_CHECK_USAGE(!workersKnown || workers % tensorParallel == 0, "--workers ", workers,
                       " is not a multiple of --tensor-parallel ", tensorParallel,
                       " (workers = data-parallel replicas x tensor-parallel ranks)");
    // LARS/LAMB sum a cut weight's norms over the group (TensorParallel::setup);
    // ZeRO's shard optimizer in the mesh would need them over both dimensions.
    DTRAIN_CHECK_USAGE(!optim::needsWholeLayerNorms(optimizer) || zero == 0, "--tensor-parallel with "
                       "--zero does not support --optimizer ", optimizer, " yet (its trust ratio needs "
                       "norms over both the slices and the pieces; use one of them, or adam/adamw)");
  }
}

void TrainConfig::validateStragglers(bool workersKnown) const {
  for (const auto& [w, ms] : stragglerMs) {
    DTRAIN_CHECK_USAGE(w >= 0 && (!workersKnown || w < workers), "--straggler ", w, ":", ms, ": worker ", w,
                       " does not exist (workers are 0..", workers - 1, ")");
    DTRAIN_CHECK_USAGE(std::isfinite(ms) && ms >= 0, "--straggler ", w, ":", ms,
                       ": the delay must be >= 0 ms");
  }
}

}  // namespace dtrain::runtime
