// The data-parallel dimension of a pipeline and of a tensor-parallel mesh is
// any dp strategy: ZeRO stages 1 and 2 and gradient compression.
//
// ZeRO (--zero with --pipeline-stages / --tensor-parallel), through the
// dtrain binary: dp x tp, dp x pp (gpt's tied wte exchanged
// between the first and the last stage piece by piece) and dp x pp x tp end
// with the parameters and optimizer state of one process with the dp batch,
// under an active --clip-grad-norm (the global norm over shards, slices and
// stages); each rank keeps 1/dp of its optimizer state (and, stage 2, of its
// gradients); checkpoints hold whole tensors and resume at another layout;
// the mpi backend; stage 3 and a mesh without replicas are usage errors.
// Compression (--compress): fp16 stays with one process; PowerSGD and top-k
// with error feedback send a fraction of the bytes and still learn the task.
#include <filesystem>

#include "parallel/CliTraining.h"

namespace dtrain::test {
namespace {

// gpt-tiny with 4 heads; SGD with momentum (1e-5 equivalence, see
// TensorParallelTest.cpp) and a clip of 0.5, active on every step.
const std::string kGpt = " train --model gpt-tiny --n-head 4 --block-size 16 --seed 3 --progress off "
                         "--optimizer sgd --lr 0.1 --clip-grad-norm 0.5 ";
const std::string kMlp =
    " train --model mlp --dataset synthetic --synthetic-size 1000 --epochs 1000 --lr 0.01 "
    "--weight-decay 5e-4 --seed 7 --progress off --optimizer adam --clip-grad-norm 0.5 ";

class MeshDataParallel : public CliRuns {};

double field(const Finished& f, size_t rank, const char* name) {
  return f.line.at("memory_per_rank").at(rank).at(name).get<double>();
}

TEST_F(MeshDataParallel, TensorParallelReplicasShardedEqualOneProcess) {
  dtrain(kGpt + "--max-steps 8 --batch-size 8", "ref");
  const std::string mesh = "--max-steps 8 --batch-size 4 --workers 4 --tensor-parallel 2 ";
  const Finished plain = dtrain(kGpt + mesh, "plain");
  for (int z : {1, 2}) {
    const Finished p = dtrain(kGpt + mesh + "--zero " + std::to_string(z), "zero" + std::to_string(z));
    expectClose(saved("zero" + std::to_string(z)), saved("ref"), 1e-5,
                "gpt-tiny dp 2 x tp 2 --zero " + std::to_string(z));
    EXPECT_EQ(p.line.at("zero_stage"), z);
    for (size_t r = 0; r < 4; ++r) {
      // Half of this rank's momentum (its slices' and the replicated
      // parameters'), to within a bucket's padding.
      EXPECT_NEAR(field(p, r, "optimizer_state"), field(plain, r, "optimizer_state") / 2,
                  0.01 * field(plain, r, "optimizer_state")) << "rank " << r;
      const double grads = field(plain, r, "gradients") / (z == 2 ? 2 : 1);
      EXPECT_NEAR(field(p, r, "gradients"), grads, 0.01 * grads) << "rank " << r;
    }
  }
  // mlp with Adam: the shards' state assembled into the checkpoint's whole tensors.
  dtrain(kMlp + "--max-steps 20 --batch-size 32", "mref");
  dtrain(kMlp + "--max-steps 20 --batch-size 16 --workers 4 --tensor-parallel 2 --zero 2", "m");
  expectClose(saved("m"), saved("mref"), 1e-5, "mlp adam dp 2 x tp 2 --zero 2");
  EXPECT_EQ(saved("m").at("optimizer.1.weight.exp_avg_sq").size(), 256u * 784u);
}

TEST_F(MeshDataParallel, PipelineReplicasShardedEqualOneProcess) {
  // gpt's wte lives on the first and the last stage: each stage's ZeRO keeps
  // it in a bucket of its own, so the two exchange the same owned pieces.
  dtrain(kGpt + "--max-steps 8 --batch-size 8", "ref");
  const std::string mesh = "--max-steps 8 --batch-size 4 --workers 4 --pipeline-stages 2 --micro-batches 2 ";
  const Finished plain = dtrain(kGpt + mesh, "plain");
  for (const std::string z : {"1 --pipeline-schedule gpipe", "2"}) {
    const Finished p = dtrain(kGpt + mesh + "--zero " + z, "zero");
    expectClose(saved("zero"), saved("ref"), 1e-5, "gpt-tiny dp 2 x pp 2 --zero " + z);
    for (size_t r = 0; r < 4; ++r)
      EXPECT_NEAR(field(p, r, "optimizer_state"), field(plain, r, "optimizer_state") / 2,
                  0.01 * field(plain, r, "optimizer_state")) << "rank " << r;
  }
  dtrain(kGpt + "--max-steps 8 --batch-size 4 --workers 8 --pipeline-stages 2 "
                                    "--micro-batches 2 --tensor-parallel 2 --zero 2", "pptp");
  expectClose(saved("pptp"), saved("ref"), 1e-5, "gpt-tiny dp 2 x pp 2 x tp 2 --zero 2");
}

TEST_F(MeshDataParallel, CheckpointsResumeAtAnotherLayout) {
  // 4 steps as dp 2 x pp 2 with ZeRO-1 (whole tensors saved, Adam state
  // gathered from the shards), then 4 more as dp 2 x tp 2 with ZeRO-2 or as
  // one process: the same as 8 uninterrupted steps of one process.
  dtrain(kMlp + "--max-steps 8 --batch-size 32", "ref");
  dtrain(kMlp + "--max-steps 4 --batch-size 16 --workers 4 --pipeline-stages 2 --micro-batches 2 --zero 1",
         "half");
  for (const std::string more : {"--batch-size 32", "--batch-size 16 --workers 4 --tensor-parallel 2 --zero 2"}) {
    dtrain(kMlp + "--max-steps 8 " + more + " --load " + dir_ + "/half.safetensors", "resumed");
    expectClose(saved("resumed"), saved("ref"), 1e-5, "dp 2 x pp 2 --zero 1 for 4 steps, then '" + more + "'");
  }
  // Periodic checkpoints of dp x tp with ZeRO-2, resumed with --resume auto.
  const std::string tp = kMlp + "--batch-size 16 --workers 4 --tensor-parallel 2 --zero 2 "
                         "--checkpoint-every 4 --checkpoint-dir " + dir_ + "/ckpt ";
  dtrain(tp + "--max-steps 4", "first");
  dtrain(tp + "--max-steps 8 --resume auto", "auto");
  expectClose(saved("auto"), saved("ref"), 1e-5, "dp 2 x tp 2 --zero 2, checkpoint at 4, resume auto to 8");
}

TEST_F(MeshDataParallel, CompressedReplicasOfPipelinesAndGroups) {
  // fp16 gradients: each stage's (each slice's) replicas average in half precision.
  dtrain(kGpt + "--max-steps 8 --batch-size 8", "ref");
  dtrain(kGpt + "--max-steps 8 --batch-size 4 --workers 4 --pipeline-stages 2 --micro-batches 2 "
                "--compress fp16", "pp");
  expectClose(saved("pp"), saved("ref"), 1e-3, "gpt-tiny dp 2 x pp 2 --compress fp16");
  dtrain(kGpt + "--max-steps 8 --batch-size 4 --workers 4 --tensor-parallel 2 --compress fp16", "tp");
  expectClose(saved("tp"), saved("ref"), 1e-3, "gpt-tiny dp 2 x tp 2 --compress fp16");
  // Error-feedback compressors from the first step: a fraction of the bytes, the task learnt.
  const std::string task = " train --model mlp --dataset synthetic --synthetic-size 1000 --epochs 1000 "
                           "--max-steps 60 --batch-size 16 --progress off --seed 7 --lr 0.05 --workers 4 ";
  const std::string pp = "--pipeline-stages 2 --micro-batches 2 ", tp = "--tensor-parallel 2 ";
  const Finished ppPlain = dtrain(task + pp, "pp-plain"), tpPlain = dtrain(task + tp, "tp-plain");
  for (const std::string c : {"powersgd --compress-rank 4 --compress-start-step 0", "topk --compress-ratio 0.01"}) {
    const Finished p = dtrain(task + pp + "--compress " + c, "pp-c");
    EXPECT_GE(p.line.at("test_accuracy").get<double>(), 0.95) << c;
    EXPECT_LT(p.line.at("dp_bytes_sent_per_worker").get<double>(),
              0.2 * ppPlain.line.at("dp_bytes_sent_per_worker").get<double>()) << c;
    const Finished t = dtrain(task + tp + "--compress " + c, "tp-c");
    EXPECT_GE(t.line.at("test_accuracy").get<double>(), 0.95) << c;
    EXPECT_LT(t.line.at("bytes_sent_per_worker").get<double>(),
              0.2 * tpPlain.line.at("bytes_sent_per_worker").get<double>()) << c;
  }
}

TEST(MeshDataParallelUsage, BadCombinationsAreOneLineErrors) {
  const std::string mlp = std::string(DTRAIN_BIN) + kMlp + "--max-steps 2 ";
  expectError(runShell(mlp + "--workers 4 --tensor-parallel 2 --zero 3"), 2,
              "--zero 3 does not combine with --tensor-parallel (stages 1 and 2 do");
  expectError(runShell(mlp + "--workers 4 --pipeline-stages 2 --zero 3"), 2,
              "--zero 3 does not combine with --pipeline-stages");
  expectError(runShell(mlp + "--pipeline-stages 2 --zero 1"), 2,
              "--zero with --pipeline-stages applies across data-parallel replicas, and this run has "
              "one (--workers 2 = 2 model-parallel ranks): use --workers 4 or more");
  expectError(runShell(mlp + "--workers 4 --tensor-parallel 4 --zero 2"), 2,
              "use --workers 8 or more");
  expectError(runShell(mlp + "--pipeline-stages 2 --compress onebit"), 2,
              "--compress onebit with --pipeline-stages applies across data-parallel replicas");
  expectError(runShell(mlp + "--workers 4 --tensor-parallel 2 --compress fp16 --checkpoint-every 2 "
                       "--checkpoint-dir /tmp/unused-dtrain-ckpt"),
              2, "--checkpoint-every does not combine with --tensor-parallel and --compress yet");
}

#ifdef DTRAIN_MPIEXEC
TEST_F(MeshDataParallel, MpiBackendEqualsOneProcess) {
  dtrain(kGpt + "--max-steps 6 --batch-size 8", "ref");
  train(mpirun(4), kGpt + "--backend mpi --max-steps 6 --batch-size 4 "
                            "--pipeline-stages 2 --micro-batches 2 --zero 2", dir_, "pp-mpi");
  expectClose(saved("pp-mpi"), saved("ref"), 1e-5, "gpt-tiny mpi dp 2 x pp 2 --zero 2");
  train(mpirun(4), kGpt + "--backend mpi --max-steps 6 --batch-size 4 "
                            "--tensor-parallel 2 --zero 1", dir_, "tp-mpi");
  expectClose(saved("tp-mpi"), saved("ref"), 1e-5, "gpt-tiny mpi dp 2 x tp 2 --zero 1");
}
#endif

}  // namespace
}  // namespace dtrain::test
