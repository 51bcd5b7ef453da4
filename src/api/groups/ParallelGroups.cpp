// [parallel] (strategy, ranks, mesh), [allreduce] and [compress].
#include "api/Schema.h"
#include "api/StrategyRegistry.h"
#include "api/groups/Conditions.h"
#include "parallel/compress/Compressor.h"

namespace dtrain::api {

using runtime::TrainConfig;

void addParallelOptions(Schema& s) {
  s.addGroup("parallel", "Parallelism: strategy, ranks and mesh");
  std::string strategies;
  for (const std::string& name : strategyNames())
    strategies += (strategies.empty() ? "" : ", ") + strategyEntry(name).summary;
  s.add("parallel", "strategy", "--strategy", strategies)
      .train(&TrainConfig::strategy)
      .oneOf(strategyNames);
  s.add("parallel", "workers", "--workers",
        "Workers (local backend: ranks as threads; mpi: must match mpirun -np)")
      .train(&TrainConfig::workers).range(1, 4096).result("workers");
  s.add("parallel", "backend", "--backend", "local (threads) or mpi (one process per rank under mpirun)")
      .train(&TrainConfig::backend).oneOf({"local", "mpi"});
  s.add("parallel", "comm_timeout", "--comm-timeout",
        "mpi: seconds a peer may send no heartbeat (one a second, from a thread of its own) "
        "before a wait on it fails naming it: it died, is stopped or its link is down (the job "
        "is aborted); 0: 30 s")
      .train(&TrainConfig::commTimeoutS).range(0)
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.backend == "mpi",
                          "applies to --backend mpi (local ranks are threads of one process: one "
                          "that fails ends the others' waits at once; --call-timeout bounds a wait "
                          "on a stuck one)");
      });
  s.add("parallel", "call_timeout", "--call-timeout",
        "Seconds a rank waits in one communication call, every peer alive, before it fails "
        "naming the peers it waited for (a stuck peer; mpi: the job is aborted); 0: 300 s, or "
        "DTRAIN_COMM_TIMEOUT_MS")
      .train(&TrainConfig::callTimeoutS).range(0)
      .when([](const RunConfig& rc) {
        const TrainConfig& c = rc.train;
        const std::string name = resolveStrategy(c);
        // A strategy without ranks of its own (fedavg's clients are threads) has ranks under mpi only.
        const auto& ranks = strategyEntry(name).worldSize;
        if (!ranks) return c.backend == "mpi" ? std::string() : "applies to --strategy " + name + " under --backend mpi";
        return unlessThen(ranks(c) > 1 || c.backend == "mpi",
                          "applies to runs of several ranks (--workers N or --backend mpi)");
      });
  s.add("parallel", "pipeline_stages", "--pipeline-stages",
        "Cut the model into P pipeline stages (workers = data-parallel replicas x P; default "
        "workers P)")
      .train(&TrainConfig::pipelineStages).range(1);
  auto pipelined = [](const RunConfig& rc) {
    return unlessThen(rc.train.pipelineStages > 1, "applies to --pipeline-stages P > 1");
  };
  s.add("parallel", "micro_batches", "--micro-batches",
        "pipeline: micro-batches per step (--batch-size must divide by it)")
      .train(&TrainConfig::microBatches).range(1).when(pipelined);
  s.add("parallel", "pipeline_schedule", "--pipeline-schedule", "pipeline: gpipe or 1f1b")
      .train(&TrainConfig::pipelineSchedule).oneOf({"gpipe", "1f1b"}).when(pipelined);
  s.add("parallel", "virtual_stages", "--virtual-stages",
        "pipeline: model chunks per stage, v > 1 interleaves 1f1b (Megatron; bubble / v, "
        "--micro-batches a multiple of P)")
      .train(&TrainConfig::virtualStages).range(1).when(pipelined);
  s.add("parallel", "pipeline_split", "--pipeline-split",
        "pipeline: first layer of stages 1..P-1 (of chunks 1..P*v-1 with --virtual-stages), "
        "e.g. 2,4 (default: balanced by measured per-layer time)")
      .train(&TrainConfig::pipelineSplit).range(1).when(pipelined);
  s.add("parallel", "tensor_parallel", "--tensor-parallel",
        "Cut the model's layers across T ranks, Megatron-style (workers = data-parallel "
        "replicas x T; default workers T)")
      .train(&TrainConfig::tensorParallel).range(1);
  s.add("parallel", "tensor_parallel_style", "--tensor-parallel-style",
        "megatron (a group's ranks on the same samples) or krizhevsky (mlp, lenet: the layers "
        "below the cut data-parallel in the group, the cut ones on its gathered batch: 'one "
        "weird trick')")
      .train(&TrainConfig::tensorParallelStyle)
      .oneOf({"megatron", "krizhevsky"})
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.tensorParallel > 1, "applies to --tensor-parallel T > 1");
      });
  s.add("parallel", "placement", "--placement",
        "pack (a pipeline's stages or a tensor-parallel group on neighbouring ranks) or spread "
        "(replicas first)")
      .train(&TrainConfig::placement)
      .oneOf({"pack", "spread"})
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.pipelineStages * rc.train.tensorParallel > 1,
                          "applies to meshes (--pipeline-stages or --tensor-parallel)");
      });
}

void addAllreduceOptions(Schema& s) {
  s.addGroup("allreduce", "Allreduce data parallelism");
  s.add("allreduce", "fusion_mb", "--fusion-mb", "Fusion bucket size in MiB")
      .train(&TrainConfig::fusionMb).above(0);
  s.add("allreduce", "overlap", "", "Allreduce only after the whole backward (for comparison; "
        "default: each bucket as soon as backward has its gradients)")
      .train(&TrainConfig::overlap).negated("--no-overlap").result("overlap");
  s.add("allreduce", "sync_bn", "--sync-bn",
        "BatchNorm statistics over every replica's batch, as torch.nn.SyncBatchNorm (one "
        "allreduce per BatchNorm forward and backward; default: each replica its own batch's)")
      .train(&TrainConfig::syncBn)
      .result("sync_bn")
      .when([](const RunConfig& rc) {
        return unlessThen(rc.train.zero == 0, "applies to --zero 0 (ZeRO's replicas keep their own "
                                              "batch statistics)");
      });
  s.add("allreduce", "algo", "--allreduce-algo", "auto, ring, rhd, tree, hier, shm or native (mpi)")
      .train(&TrainConfig::allreduceAlgo)
      .oneOf({"auto", "ring", "rhd", "tree", "hier", "shm", "native"})
      .result("allreduce_algo");
  // parallel/allreduce/SufficientFactors.h; docs/guide/sufficient-factors.md.
  s.add("allreduce", "sfb", "--sfb",
        "Sufficient factor broadcasting: send a Linear layer's B input and output-gradient rows "
        "instead of its weight gradient: off, on (every Linear) or auto (where B (M+N) < M N)")
      .train(&TrainConfig::sfb)
      .oneOf({"off", "on", "auto"})
      .result("sfb")
      .when([](const RunConfig& rc) {
        if (rc.train.sfb == "off") return std::string();
        if (rc.train.zero > 0)
          return std::string("does not combine with --zero (its buckets are reduce-scattered)");
        return unlessThen(rc.train.compress == "none",
                          "does not combine with --compress (both replace the weights' allreduce)");
      });
}

void addCompressOptions(Schema& s) {
  s.addGroup("compress", "Gradient compression");
  s.add("compress", "name", "--compress",
        "Gradient compression (allreduce; ps pushes: the allgather ones and the casts): " +
            parallel::compress::describeCompressors())
      .train(&TrainConfig::compress)
      .oneOf([] { return parallel::compress::compressorNames(); })
      .result("compress");
  auto forCompressors = [](std::vector<std::string> users) {
    return [users](const RunConfig& rc) -> std::string {
      for (const auto& u : users)
        if (rc.train.compress == u) return "";
      std::string names;
      for (size_t i = 0; i < users.size(); ++i)
        names += (i == 0 ? "" : i + 1 == users.size() ? " or " : ", ") + users[i];
      return "applies to --compress " + names + " (got --compress " + rc.train.compress + ")";
    };
  };
  s.add("compress", "bits", "--compress-bits", "qsgd: bits per level (2^b - 1 levels per chunk)")
      .train(&TrainConfig::compressBits).range(1, 15).result("compress_bits")
      .when(forCompressors({"qsgd"}));
  s.add("compress", "ratio", "--compress-ratio", "topk, randomk: fraction of the values sent")
      .train(&TrainConfig::compressRatio).above(0, 1).result("compress_ratio")
      .when(forCompressors({"topk", "randomk"}));
  s.add("compress", "rank", "--compress-rank", "powersgd: rank of the P/Q factors")
      .train(&TrainConfig::compressRank).range(1).result("compress_rank")
      .when(forCompressors({"powersgd"}));
  s.add("compress", "start_step", "--compress-start-step",
        "powersgd: steps of plain allreduce before compressing")
      .train(&TrainConfig::compressStartStep).range(0).result("compress_start_step")
      .when(forCompressors({"powersgd"}));
  s.add("compress", "collective", "--compress-collective",
        "onebit, signsgd, qsgd, topk: allgather (every message to every rank) or two-stage "
        "(compressed reduce-scatter + allgather, 1-bit Adam's)")
      .train(&TrainConfig::compressCollective)
      .oneOf({"allgather", "two-stage"})
      .result("compress_collective")
      .when(forCompressors({"onebit", "signsgd", "qsgd", "topk"}));
}

}  // namespace dtrain::api
