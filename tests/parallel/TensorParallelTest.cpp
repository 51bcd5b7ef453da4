// Tensor parallelism (Megatron-style) through the dtrain binary: T = 2 and 4
// ranks end with the same parameters as one process (gpt-tiny with 4 heads:
// attention split by heads, MLP column then row; mlp and lenet: their Linear ->
// ReLU -> Linear runs), with --clip-grad-norm seeing the global norm; dp x tp
// (pack and spread) equals one process with the dp batch, and so do pipelines
// whose stages are cut (pp x tp, dp x pp x tp); checkpoints hold
// whole tensors and load at any T; evaluations see the whole model; the mpi
// backend; Krizhevsky's "one weird trick" (the layers below the cut
// data-parallel in the group) equals one process with the group's batch; bad
// flags are usage errors.
#include <cmath>
#include <filesystem>

#include "parallel/CliTraining.h"

namespace dtrain::test {
namespace {

const std::string kMlp =
    " train --model mlp --dataset synthetic --synthetic-size 1000 --epochs 1000 --lr 0.01 "
    "--weight-decay 5e-4 --seed 7 --progress off ";
// gpt-tiny with 4 heads (T = 4 splits them one per rank) and a short context.
// SGD: Adam's first steps amplify the summation-order noise of the group's
// partial sums where gradients are ~0 (tests/parallel/ResumeTest.cpp), so the
// 1e-5 equivalence is asserted with SGD + momentum; a clip of 0.5 is active
// on every step (the global norm starts near 4 and stays above 1).
const std::string kGpt = " train --model gpt-tiny --n-head 4 --block-size 16 --seed 3 --progress off "
                         "--optimizer sgd --lr 0.1 --clip-grad-norm 0.5 ";

class TensorParallelRuns : public CliRuns {};

TEST_F(TensorParallelRuns, GptAtTwoAndFourRanksEqualsOneProcess) {
  const Finished ref = dtrain(kGpt + "--max-steps 20 --batch-size 4", "ref");
  for (int t : {2, 4}) {
    const Finished p = dtrain(kGpt + "--max-steps 20 --batch-size 4 --tensor-parallel " +
                                  std::to_string(t), "tp" + std::to_string(t));
    expectClose(p.params, ref.params, 1e-5, "gpt-tiny tp=" + std::to_string(t));
    EXPECT_NEAR(p.line.at("train_loss").get<double>(), ref.line.at("train_loss").get<double>(), 1e-5);
    EXPECT_EQ(p.line.at("strategy"), "tensor");
    EXPECT_EQ(p.line.at("tensor_parallel"), t);
    EXPECT_EQ(p.line.at("workers"), t);
    EXPECT_EQ(p.line.at("global_batch"), 4);
    // The whole model's count; each rank holds its slices of the blocks.
    EXPECT_EQ(p.line.at("parameters"), ref.line.at("parameters"));
    EXPECT_LT(p.line.at("parameters_per_rank").get<double>(),
              0.8 * ref.line.at("parameters").get<double>());
    EXPECT_GT(p.line.at("tp_bytes_sent_per_step").get<double>(), 0);
    EXPECT_EQ(p.line.at("memory_per_rank").size(), static_cast<size_t>(t));
  }
}

TEST_F(TensorParallelRuns, ComposesWithRecomputationAndAccumulation) {
  // Recomputation re-runs a block's forward, sums over the group included, on
  // every rank alike during backward; accumulation runs the sums per micro-step.
  const Finished ref = dtrain(kGpt + "--max-steps 10 --batch-size 4", "ref");
  for (const std::string extra : {"--recompute blocks", "--recompute all", "--batch-size 2 --accumulate 2"}) {
    const Finished p = dtrain(kGpt + "--max-steps 10 --batch-size 4 --tensor-parallel 2 " + extra, "p");
    expectClose(p.params, ref.params, 1e-5, "gpt-tiny tp=2 " + extra);
  }
}

TEST_F(TensorParallelRuns, GptWithAdamWStaysWithOneProcess) {
  // The gpt defaults (AdamW, clip 1): the partial sums' rounding is amplified
  // by Adam's normalization, so a looser bound than SGD's.
  const std::string gpt = " train --model gpt-tiny --block-size 16 --seed 3 --progress off ";
  const Finished ref = dtrain(gpt + "--max-steps 10 --batch-size 4", "ref");
  const Finished p = dtrain(gpt + "--max-steps 10 --batch-size 4 --tensor-parallel 2", "tp");
  expectClose(p.params, ref.params, 1e-4, "gpt-tiny adamw tp=2");
}

// LARS and LAMB: a cut weight's trust ratio comes from the norms of all its
// slices (summed over the group), so T = 2 and 4 end where one process does
// (each slice with its own ratio would not); gpt-tiny's cut attention and MLP
// beside its whole LayerNorms and embeddings.
TEST_F(TensorParallelRuns, LarsAndLambTakeTheirTrustRatiosOverTheSlices) {
  for (const std::string opt : {"--optimizer lamb --lr 0.01 --weight-decay 0.01 ",
                                "--optimizer lars --lr 0.5 --momentum 0.9 --weight-decay 1e-4 "}) {
    const std::string mlp = kMlp + opt + "--max-steps 20 --batch-size 16 ";
    const Finished ref = dtrain(mlp, "ref");
    for (int t : {2, 4}) {
      const Finished p = dtrain(mlp + "--tensor-parallel " + std::to_string(t), "tp" + std::to_string(t));
      expectClose(p.params, ref.params, 1e-5, opt + "mlp tp=" + std::to_string(t));
    }
  }
  const std::string gpt = " train --model gpt-tiny --n-head 4 --block-size 16 --seed 3 --progress off "
                          "--optimizer lamb --lr 0.005 --weight-decay 0.01 --max-steps 8 --batch-size 4 ";
  const Finished ref = dtrain(gpt, "gref");
  const Finished p = dtrain(gpt + "--tensor-parallel 4", "gtp4");
  expectClose(p.params, ref.params, 1e-4, "gpt-tiny lamb tp=4");
}

TEST_F(TensorParallelRuns, MlpAndLenetEqualOneProcess) {
  const Finished ref = dtrain(kMlp + "--max-steps 30 --batch-size 16", "ref");
  for (int t : {2, 4}) {
    const Finished p = dtrain(kMlp + "--max-steps 30 --batch-size 16 --tensor-parallel " +
                                  std::to_string(t), "tp" + std::to_string(t));
    expectClose(p.params, ref.params, 1e-5, "mlp tp=" + std::to_string(t));
  }
  std::string lenet = kMlp;
  lenet.replace(lenet.find("mlp"), 3, "lenet");
  const Finished lref = dtrain(lenet + "--max-steps 10 --batch-size 16", "lref");
  const Finished lp = dtrain(lenet + "--max-steps 10 --batch-size 16 --tensor-parallel 2", "ltp");
  expectClose(lp.params, lref.params, 1e-5, "lenet tp=2");
}

TEST_F(TensorParallelRuns, DataParallelTimesTensorParallelEqualsOneProcessWithDpBatch) {
  const Finished ref = dtrain(kMlp + "--max-steps 20 --batch-size 32", "ref");
  for (const char* placement : {"pack", "spread"}) {
    const Finished p = dtrain(kMlp + "--max-steps 20 --batch-size 16 --workers 4 --tensor-parallel 2 "
                                  "--placement " + std::string(placement), placement);
    expectClose(p.params, ref.params, 1e-5, std::string("mlp dp 2 x tp 2 ") + placement);
    EXPECT_EQ(p.line.at("tensor_parallel_replicas"), 2);
    EXPECT_EQ(p.line.at("global_batch"), 32);
  }
  const Finished gref = dtrain(kGpt + "--max-steps 8 --batch-size 8", "gref");
  const Finished g = dtrain(kGpt + "--max-steps 8 --batch-size 4 --workers 4 --tensor-parallel 2", "g");
  expectClose(g.params, gref.params, 1e-5, "gpt-tiny dp 2 x tp 2");
}

TEST_F(TensorParallelRuns, CheckpointsHoldWholeTensorsAndLoadAtAnyT) {
  const Finished ref = dtrain(kMlp + "--max-steps 20 --batch-size 16", "ref");
  const Finished half = dtrain(kMlp + "--max-steps 10 --batch-size 16 --tensor-parallel 2", "half");
  // Whole tensors under the usual names (the optimizer's too).
  const Params saved = loadCheckpointTensors(dir_ + "/half.safetensors");
  EXPECT_EQ(saved.at("1.weight").size(), 256u * 784u);
  EXPECT_EQ(saved.at("3.weight").size(), 256u * 256u);
  EXPECT_EQ(saved.at("optimizer.1.weight.momentum_buffer").size(), 256u * 784u);
  for (const std::string more : {"", "--tensor-parallel 4", "--tensor-parallel 2"}) {
    const Finished resumed = dtrain(kMlp + "--max-steps 20 --batch-size 16 " + more + " --load " +
                                        dir_ + "/half.safetensors", "resumed");
    expectClose(resumed.params, ref.params, 1e-5, "tp=2 for 10 steps, then '" + more + "' for 10");
  }
}

TEST_F(TensorParallelRuns, PeriodicCheckpointsResumeLikeOneUninterruptedRun) {
  const Finished ref = dtrain(kGpt + "--max-steps 12 --batch-size 4", "ref");
  const std::string tp = kGpt + "--batch-size 4 --tensor-parallel 2 --checkpoint-every 4 --checkpoint-dir " +
                         dir_ + "/ckpt ";
  dtrain(tp + "--max-steps 8", "first");
  const Finished resumed = dtrain(tp + "--max-steps 12 --resume auto", "resumed");
  expectClose(resumed.params, ref.params, 1e-5, "tp=2 checkpoint at 8, resume auto to 12");
}

TEST_F(TensorParallelRuns, EvaluationsDuringTrainingSeeTheWholeModel) {
  const Finished ref = dtrain(kMlp + "--max-steps 12 --batch-size 16 --eval-every 4", "ref");
  const Finished p = dtrain(kMlp + "--max-steps 12 --batch-size 16 --eval-every 4 --tensor-parallel 2", "p");
  EXPECT_NEAR(p.line.at("test_loss").get<double>(), ref.line.at("test_loss").get<double>(), 1e-5);
  EXPECT_NEAR(p.line.at("test_accuracy").get<double>(), ref.line.at("test_accuracy").get<double>(), 1e-9);
}

TEST_F(TensorParallelRuns, PipelineStagesCutAcrossTensorParallelGroupsEqualOneProcess) {
  // pp 2 x tp 2: each stage's blocks cut across its group; dp 2 x pp 2 x tp 2
  // (8 ranks) in both placements equals one process with the dp batch.
  const Finished ref = dtrain(kGpt + "--max-steps 12 --batch-size 4", "ref");
  for (const char* schedule : {"1f1b", "gpipe"}) {
    const Finished p = dtrain(kGpt + "--max-steps 12 --batch-size 4 --pipeline-stages 2 --micro-batches 2 "
                                  "--tensor-parallel 2 --pipeline-schedule " + std::string(schedule), schedule);
    expectClose(p.params, ref.params, 1e-5, std::string("gpt-tiny pp 2 x tp 2 ") + schedule);
    EXPECT_EQ(p.line.at("strategy"), "pipeline");
    EXPECT_EQ(p.line.at("workers"), 4);
    EXPECT_EQ(p.line.at("memory_per_rank").size(), 4u);
  }
  const Finished dpRef = dtrain(kGpt + "--max-steps 8 --batch-size 8", "dpref");
  for (const char* placement : {"pack", "spread"}) {
    const Finished p = dtrain(kGpt + "--max-steps 8 --batch-size 4 --workers 8 --pipeline-stages 2 "
                                  "--micro-batches 2 --tensor-parallel 2 --placement " + std::string(placement),
                              placement);
    expectClose(p.params, dpRef.params, 1e-5, std::string("gpt-tiny dp 2 x pp 2 x tp 2 ") + placement);
    EXPECT_EQ(p.line.at("global_batch"), 8);
  }
}

TEST_F(TensorParallelRuns, PipelineWithTensorParallelEvaluatesSavesAndResumes) {
  // mlp cut at layer 4: stage 0 holds the Linear -> ReLU -> Linear pair (cut),
  // stage 1 only the classifier (run whole on both of its ranks).
  const std::string mlp = kMlp + "--batch-size 16 --eval-every 5 ";
  const Finished ref = dtrain(mlp + "--max-steps 20", "ref");
  const std::string pptp = "--pipeline-stages 2 --micro-batches 2 --pipeline-split 4 --tensor-parallel 2 ";
  const Finished p = dtrain(mlp + "--max-steps 20 " + pptp, "p");
  expectClose(p.params, ref.params, 1e-5, "mlp pp 2 x tp 2");
  EXPECT_NEAR(p.line.at("test_loss").get<double>(), ref.line.at("test_loss").get<double>(), 1e-5);
  dtrain(mlp + "--max-steps 10 " + pptp, "half");
  const Finished resumed = dtrain(mlp + "--max-steps 20 --tensor-parallel 4 --load " + dir_ + "/half.safetensors",
                                  "resumed");
  expectClose(resumed.params, ref.params, 1e-5, "pp 2 x tp 2 for 10 steps, then tp 4 for 10");
}

TEST_F(TensorParallelRuns, KrizhevskysTrickEqualsOneProcessWithTheGroupsBatch) {
  // lenet: the convolutions data-parallel inside the group (each rank its own
  // 16 samples), the fully-connected pair cut over the group's gathered 32.
  std::string lenet = kMlp;
  lenet.replace(lenet.find("mlp"), 3, "lenet");
  lenet += "--clip-grad-norm 0.5 --eval-every 5 ";
  const Finished ref = dtrain(lenet + "--max-steps 10 --batch-size 32", "ref");
  const std::string owt = "--tensor-parallel-style krizhevsky ";
  const Finished p = dtrain(lenet + "--max-steps 10 --batch-size 16 --tensor-parallel 2 " + owt, "owt");
  expectClose(p.params, ref.params, 1e-5, "lenet krizhevsky tp=2");
  EXPECT_EQ(p.line.at("global_batch"), 32);
  EXPECT_EQ(p.line.at("tensor_parallel_style"), "krizhevsky");
  EXPECT_NEAR(p.line.at("train_loss").get<double>(), ref.line.at("train_loss").get<double>(), 1e-5);
  EXPECT_NEAR(p.line.at("test_loss").get<double>(), ref.line.at("test_loss").get<double>(), 1e-5);
  // dp 2 x tp 2 (with ZeRO-2 across the replicas) and tp 4.
  const Finished dp = dtrain(lenet + "--max-steps 10 --batch-size 8 --workers 4 --tensor-parallel 2 --zero 2 " + owt, "dp");
  expectClose(dp.params, ref.params, 1e-5, "lenet krizhevsky dp 2 x tp 2 --zero 2");
  const Finished mref = dtrain(kMlp + "--max-steps 10 --batch-size 32", "mref");
  const Finished m = dtrain(kMlp + "--max-steps 10 --batch-size 8 --tensor-parallel 4 " + owt, "m");
  expectClose(m.params, mref.params, 1e-5, "mlp krizhevsky tp=4");
}

TEST_F(TensorParallelRuns, LoraAdaptersAreCutWithTheirLayers) {
  // Column-parallel layers keep their B rows (c_attn's per head: q | k | v) and
  // a whole A, row-parallel ones their A columns and a whole B; the frozen
  // base slices are gathered with the adapters for saving.
  const std::string gpt = " train --model gpt-tiny --n-head 4 --block-size 16 --seed 3 --progress off "
                          "--lr 0.01 --lora-rank 2 --max-steps 8 ";
  const Finished ref = dtrain(gpt + "--batch-size 8", "ref");
  for (const std::string mesh : {"--batch-size 8 --tensor-parallel 2", "--batch-size 8 --tensor-parallel 4",
                                 "--batch-size 4 --workers 4 --tensor-parallel 2 --zero 1",
                                 "--batch-size 8 --workers 4 --pipeline-stages 2 --micro-batches 2 --tensor-parallel 2"}) {
    const Finished p = dtrain(gpt + mesh, "p");
    expectClose(p.params, ref.params, 1e-5, "gpt-tiny LoRA " + mesh);
    EXPECT_EQ(p.line.at("trainable_parameters"), ref.line.at("trainable_parameters"));
  }
  const Params saved = loadCheckpointTensors(dir_ + "/p.safetensors");
  EXPECT_EQ(saved.at("transformer.h.0.attn.c_attn.lora_B.weight").size(), 3u * 64u * 2u);
  EXPECT_EQ(saved.at("transformer.h.0.mlp.c_proj.lora_A.weight").size(), 2u * 256u);
  EXPECT_EQ(saved.at("transformer.h.0.mlp.c_fc.weight").size(), 256u * 64u);
  // The adapters trained: B started at zero.
  double moved = 0;
  for (float x : saved.at("transformer.h.0.attn.c_attn.lora_B.weight")) moved += std::abs(x);
  EXPECT_GT(moved, 0);
  const Finished mref = dtrain(kMlp + "--max-steps 20 --batch-size 16 --lora-rank 4", "mref");
  const Finished m = dtrain(kMlp + "--max-steps 20 --batch-size 16 --lora-rank 4 --tensor-parallel 2", "m");
  expectClose(m.params, mref.params, 1e-5, "mlp LoRA tp=2");
}

TEST(TensorParallelUsage, BadFlagsAreOneLineErrors) {
  const std::string mlp = std::string(DTRAIN_BIN) + kMlp + "--max-steps 2 ";
  expectError(runShell(mlp + "--workers 3 --tensor-parallel 2"), 2,
              "--workers 3 is not a multiple of --tensor-parallel 2");
  expectError(runShell(mlp + "--tensor-parallel 0"), 2, "--tensor-parallel must be >= 1");
  expectError(runShell(mlp + "--tensor-parallel 3"), 2, "does not split into 3 equal slices");
  expectError(runShell(mlp + "--tensor-parallel 2 --strategy ps"), 2, "drop --strategy ps");
  expectError(runShell(mlp + "--workers 6 --tensor-parallel 2 --pipeline-stages 2"), 2,
              "--workers 6 is not a multiple of --pipeline-stages 2 x --tensor-parallel 2");
  expectError(runShell(mlp + "--tensor-parallel 2 --strategy hogwild"), 2, "drop --strategy hogwild");
  expectError(runShell(mlp + "--workers 4 --tensor-parallel 2 --zero 1 --optimizer lamb"), 2,
              "--tensor-parallel with --zero does not support --optimizer lamb yet");
  expectError(runShell(mlp + "--tensor-parallel 2 --compress fp16"), 2,
              "--compress fp16 with --tensor-parallel applies across data-parallel replicas, and "
              "this run has one");
  expectError(runShell(mlp + "--tensor-parallel 2 --tensor-parallel-style zigzag"), 2,
              "unknown --tensor-parallel-style 'zigzag' (known: megatron, krizhevsky)");
  expectError(runShell(mlp + "--tensor-parallel-style krizhevsky"), 2,
              "--tensor-parallel-style applies to --tensor-parallel T > 1");
  expectError(runShell(std::string(DTRAIN_BIN) + " train --model gpt-tiny --max-steps 2 --tensor-parallel 2 "
                       "--tensor-parallel-style krizhevsky"),
              2, "--tensor-parallel-style krizhevsky needs a sequence of layers");
  expectError(runShell(std::string(DTRAIN_BIN) + " train --model gpt-tiny --max-steps 2 --tensor-parallel 4"),
              2, "the attention's 2 heads do not split evenly");
}

#ifdef DTRAIN_MPIEXEC
TEST_F(TensorParallelRuns, MpiBackendEqualsOneProcess) {
  const Finished mlpRef = dtrain(kMlp + "--max-steps 20 --batch-size 16", "mlp");
  const Finished mlp = train(mpirun(2), kMlp + "--backend mpi --max-steps 20 --batch-size 16 "
                             "--tensor-parallel 2", dir_, "mlp-mpi");
  expectClose(mlp.params, mlpRef.params, 1e-5, "mlp mpi tp=2");
  EXPECT_EQ(mlp.line.at("backend"), "mpi");
  const Finished gptRef = dtrain(kGpt + "--max-steps 6 --batch-size 4", "gpt");
  const Finished gpt = train(mpirun(2), kGpt + "--backend mpi --max-steps 6 --batch-size 4 "
                             "--tensor-parallel 2", dir_, "gpt-mpi");
  expectClose(gpt.params, gptRef.params, 1e-5, "gpt-tiny mpi tp=2");
  const Finished hybrid = train(mpirun(4), kGpt + "--backend mpi --max-steps 6 --batch-size 4 "
                                "--pipeline-stages 2 --micro-batches 2 --tensor-parallel 2", dir_, "pptp-mpi");
  expectClose(hybrid.params, gptRef.params, 1e-5, "gpt-tiny mpi pp 2 x tp 2");
  const Finished mlpDp = dtrain(kMlp + "--max-steps 20 --batch-size 32", "mlp-dp");
  const Finished owt = train(mpirun(2), kMlp + "--backend mpi --max-steps 20 --batch-size 16 "
                             "--tensor-parallel 2 --tensor-parallel-style krizhevsky", dir_, "owt-mpi");
  expectClose(owt.params, mlpDp.params, 1e-5, "mlp mpi krizhevsky tp=2");
}
#endif

}  // namespace
}  // namespace dtrain::test
