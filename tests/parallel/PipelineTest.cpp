// Pipeline parallelism through the dtrain binary: a P-stage pipeline (GPipe or
// 1F1B, M micro-batches) ends with the same parameters as one process with the
// same --batch-size (mlp and gpt-tiny, whose tied wte spans the first and the
// last stage), on the local and the mpi backends; dp x pp equals one process
// with batch dp*B; interleaved 1F1B (--virtual-stages) equals one process too
// and holds each chunk's activations; the checkpoint holds the whole model,
// and --load resumes a pipeline; LoRA adapters train across stages; bad flags
// are usage errors.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "parallel/CliTraining.h"

namespace dtrain::test {
namespace {

const std::string kMlp =
    " train --model mlp --dataset synthetic --synthetic-size 1000 --epochs 1000 --lr 0.01 "
    "--weight-decay 5e-4 --seed 7 --progress off ";
// gpt-tiny with a short context, so that a step takes milliseconds.
const std::string kGpt = " train --model gpt-tiny --block-size 16 --seed 3 --progress off ";

class Pipeline : public CliRuns {
 protected:
  // `args + single` in one process and `args + pipeline` end with the same
  // parameters; returns the pipeline's run.
  Finished expectLikeOneProcess(const std::string& args, const std::string& single,
                                const std::string& pipeline) {
    const Finished ref = dtrain(args + single, "ref");
    Finished p = dtrain(args + pipeline, "pipeline");
    expectClose(p.params, ref.params, 1e-5, args + pipeline);
    return p;
  }
};

TEST_F(Pipeline, MlpTwoStagesBothSchedulesEqualOneProcess) {
  const Finished ref = dtrain(kMlp + "--max-steps 30 --batch-size 16", "ref");
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const Finished p = dtrain(kMlp + "--max-steps 30 --batch-size 16 --pipeline-stages 2 --micro-batches 4 "
                         "--pipeline-schedule " + schedule, schedule);
    expectClose(p.params, ref.params, 1e-5, std::string("mlp pp=2 ") + schedule);
    EXPECT_EQ(p.line.at("strategy"), "pipeline");
    EXPECT_EQ(p.line.at("workers"), 2);
    EXPECT_EQ(p.line.at("global_batch"), 16);
    EXPECT_EQ(p.line.at("pipeline_bubble_per_stage").size(), 2u);
    EXPECT_NEAR(p.line.at("pipeline_bubble_ideal").get<double>(), 1.0 / 5, 1e-12);
    // 1F1B holds at most P - s micro-batches on stage s, GPipe all M.
    const auto inFlight = p.line.at("pipeline_peak_in_flight_per_stage");
    EXPECT_EQ(inFlight[0].get<double>(), std::string(schedule) == "gpipe" ? 4 : 2);
    EXPECT_EQ(inFlight[1].get<double>(), 1 + (std::string(schedule) == "gpipe" ? 3 : 0));
  }
}

TEST_F(Pipeline, MlpThreeStagesByHandEqualOneProcess) {
  const Finished p = expectLikeOneProcess(kMlp + "--max-steps 20 --batch-size 12 ", "",
                                          "--pipeline-stages 3 --micro-batches 3 --pipeline-split 2,4");
  EXPECT_EQ(p.line.at("pipeline_cuts"), nlohmann::json({0, 2, 4}));
}

TEST_F(Pipeline, AFirstStageWithoutParametersWorks) {
  // Stage 0 = Flatten alone (a noisy profile can choose that cut too).
  expectLikeOneProcess(kMlp + "--max-steps 5 ", "--batch-size 32",
                       "--batch-size 16 --workers 4 --pipeline-stages 2 --micro-batches 2 "
                       "--pipeline-split 1");
}

TEST_F(Pipeline, LenetThreeBalancedStagesEqualOneProcess) {
  std::string lenet = kMlp;
  lenet.replace(lenet.find("mlp"), 3, "lenet");
  expectLikeOneProcess(lenet + "--max-steps 10 --batch-size 16 ", "",
                       "--pipeline-stages 3 --micro-batches 4");
}

TEST_F(Pipeline, GptTiedEmbeddingAcrossStagesEqualsOneProcess) {
  // Default gpt settings: AdamW, and --clip-grad-norm 1 (the global norm over the stages).
  const Finished ref = dtrain(kGpt + "--max-steps 8 --batch-size 4", "ref");
  for (const std::string extra : {"--pipeline-stages 2 --micro-batches 2 --pipeline-schedule gpipe",
                                  "--pipeline-stages 2 --micro-batches 4 --pipeline-schedule 1f1b",
                                  "--pipeline-stages 4 --micro-batches 4 --pipeline-schedule 1f1b"}) {
    const Finished p = dtrain(kGpt + "--max-steps 8 --batch-size 4 " + extra, "p");
    expectClose(p.params, ref.params, 1e-5, "gpt-tiny " + extra);
    EXPECT_NEAR(p.line.at("train_loss").get<double>(), ref.line.at("train_loss").get<double>(), 1e-4);
  }
}

TEST_F(Pipeline, InterleavedOneFOneBEqualsOneProcess) {
  // gpt-tiny's 4 layers as 4 chunks on 2 stages: stage 0 holds the embedding
  // and the second block, stage 1 the first block and the tied head, so
  // activations wrap from stage 1 back to stage 0 and wte spans both.
  const Finished ref = dtrain(kGpt + "--max-steps 8 --batch-size 4", "ref");
  for (const std::string extra : {"--micro-batches 2", "--micro-batches 4",
                                  "--micro-batches 4 --pipeline-split 1,2,3 --eval-every 4"}) {
    const Finished p = dtrain(kGpt + "--max-steps 8 --batch-size 4 --pipeline-stages 2 --virtual-stages 2 " +
                                  extra, "p");
    expectClose(p.params, ref.params, 1e-5, "gpt-tiny pp 2 x v 2 " + extra);
    EXPECT_EQ(p.line.at("virtual_stages"), 2);
    EXPECT_EQ(p.line.at("pipeline_cuts"), nlohmann::json({0, 1, 2, 3}));
  }
  // mlp's 6 layers on 3 stages x 2 chunks; dp 2 x pp 2 x v 2.
  const Finished m = expectLikeOneProcess(kMlp + "--max-steps 20 ", "--batch-size 24",
                                          "--batch-size 24 --pipeline-stages 3 --micro-batches 6 --virtual-stages 2");
  EXPECT_NEAR(m.line.at("pipeline_bubble_ideal").get<double>(), 2.0 / 14, 1e-12);
  // Stage s holds its (P-1-s)*2 + (v-1)*P warm-up forwards plus the steady
  // state's first, each a chunk's (half a stage's) activations: 8, 6, 4.
  EXPECT_EQ(m.line.at("pipeline_peak_in_flight_per_stage"), nlohmann::json({8.0, 6.0, 4.0}));
  expectLikeOneProcess(kMlp + "--max-steps 10 ", "--batch-size 32",
                       "--batch-size 16 --workers 4 --pipeline-stages 2 --micro-batches 4 --virtual-stages 2");
}

TEST_F(Pipeline, LoraAdaptersTrainAcrossStagesLikeOneProcess) {
  // Frozen base weights on every stage, adapters trained where their layers are.
  const std::string args = kGpt + "--max-steps 6 --batch-size 4 --lora-rank 2 --lr 0.01 ";
  const Finished p = expectLikeOneProcess(args, "", "--workers 2 --pipeline-stages 2 --micro-batches 2");
  const Finished ref = dtrain(args, "ref");
  EXPECT_EQ(p.line.at("trainable_parameters"), ref.line.at("trainable_parameters"));
  EXPECT_EQ(p.line.at("parameters"), ref.line.at("parameters"));
  EXPECT_LT(p.line.at("trainable_parameters").get<double>() * 10,
            p.line.at("parameters").get<double>());
}

TEST_F(Pipeline, DataParallelTimesPipelineEqualsOneProcessWithDpBatch) {
  const Finished ref = dtrain(kMlp + "--max-steps 20 --batch-size 32", "ref");
  for (const char* placement : {"pack", "spread"}) {
    const Finished p = dtrain(kMlp + "--max-steps 20 --batch-size 16 --workers 4 --pipeline-stages 2 "
                         "--micro-batches 2 --placement " + std::string(placement), placement);
    expectClose(p.params, ref.params, 1e-5, std::string("mlp dp 2 x pp 2 ") + placement);
    EXPECT_EQ(p.line.at("pipeline_replicas"), 2);
    EXPECT_EQ(p.line.at("global_batch"), 32);
  }
  // gpt: each stage's replicas average their gradients (the tied wte's on both
  // of its stages) before the first and the last stage add their wte gradients.
  expectLikeOneProcess(kGpt + "--max-steps 6 ", "--batch-size 8",
                       "--batch-size 4 --workers 4 --pipeline-stages 2 --micro-batches 2");
}

TEST_F(Pipeline, SavedPipelineResumesLikeOneUninterruptedRun) {
  const Finished ref = dtrain(kMlp + "--max-steps 20 --batch-size 16", "ref");
  const std::string pp = "--batch-size 16 --pipeline-stages 2 --micro-batches 2 ";
  dtrain(kMlp + "--max-steps 10 " + pp, "half");
  const Finished resumed = dtrain(kMlp + "--max-steps 20 " + pp + "--load " + dir_ + "/half.safetensors",
                             "resumed");
  expectClose(resumed.params, ref.params, 1e-5, "pipeline save at 10, load, 10 more");
}

TEST_F(Pipeline, PeriodicCheckpointsResumeLikeOneUninterruptedRun) {
  // The stages' parameters and optimizer state gathered to rank 0 every 4
  // steps; resumed as the same mesh, as another one (ZeRO-1 across replicas,
  // interleaved) and as one process, each goes on as the uninterrupted run.
  const Finished ref = dtrain(kMlp + "--max-steps 12 --batch-size 32", "ref");
  const std::string dir = " --checkpoint-dir " + dir_ + "/ckpt ";
  const std::string pp = "--batch-size 16 --workers 4 --pipeline-stages 2 --micro-batches 2 --checkpoint-every 4";
  dtrain(kMlp + "--max-steps 8 " + pp + dir, "first");
  for (const std::string& more : {pp, pp + " --zero 1 --micro-batches 4 --virtual-stages 2", std::string("--batch-size 32")}) {
    const Finished resumed = dtrain(kMlp + "--max-steps 12 --resume auto " + more + dir, "resumed");
    expectClose(resumed.params, ref.params, 1e-5, "dp 2 x pp 2 checkpointed at 8, resumed with '" + more + "'");
  }
}

TEST_F(Pipeline, EveryRankHoldsOnlyItsStagesStatesWhileTraining) {
  // The reporter too: it gathers the other stages for an evaluation and frees
  // them at the next step (steps 2 and 4 here, the last is 5). memory_per_rank
  // is taken before the end's gather.
  const Finished p = dtrain(kGpt + "--max-steps 5 --batch-size 4 --pipeline-stages 2 --micro-batches 2 "
                                   "--eval-every 2", "p");
  const auto& mem = p.line.at("memory_per_rank");
  const auto& stage = p.line.at("pipeline_parameter_bytes_per_stage");
  ASSERT_EQ(mem.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(mem[s].at("parameters").get<double>(), stage[s].get<double>()) << "stage " << s;
    // AdamW: two slots per parameter float.
    EXPECT_NEAR(mem[s].at("optimizer_state").get<double>(), 2 * stage[s].get<double>(),
                0.01 * stage[s].get<double>()) << "stage " << s;
  }
  EXPECT_LT(stage[0].get<double>(), 0.75 * 4 * p.line.at("parameters").get<double>());
}

TEST_F(Pipeline, EvaluationsDuringTrainingSeeTheWholeModel) {
  const Finished ref = dtrain(kMlp + "--max-steps 12 --batch-size 16 --eval-every 4", "ref");
  const Finished p = dtrain(kMlp + "--max-steps 12 --batch-size 16 --eval-every 4 --pipeline-stages 2 "
                       "--micro-batches 2", "p");
  EXPECT_NEAR(p.line.at("test_loss").get<double>(), ref.line.at("test_loss").get<double>(), 1e-5);
}

TEST_F(Pipeline, TimelineHasALanePerStageWithItsOps) {
  CliResult r = runShell(std::string(DTRAIN_BIN) + kMlp + "--max-steps 3 --batch-size 16 "
                         "--pipeline-stages 2 --micro-batches 2 --timeline " + dir_ + "/t.json");
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<int, std::set<std::string>> ops;  // pid (rank = stage) -> span names
  const auto doc = nlohmann::json::parse(slurp(dir_ + "/t.json"));
  for (auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X") ops[e.at("pid").get<int>()].insert(e.at("name").get<std::string>());
  ASSERT_EQ(ops.size(), 2u);
  for (int stage : {0, 1})
    for (const char* name : {"F0", "F1", "B0", "B1"}) EXPECT_TRUE(ops[stage].count(name)) << stage << name;
  EXPECT_TRUE(ops[1].count("wait activation 0"));
  EXPECT_TRUE(ops[0].count("wait gradient 0"));
}

TEST_F(Pipeline, GpipeHoldsMoreActivationsPerStageThan1f1bByTheAllocator) {
  // memory_per_rank is per world rank (= stage here), from each rank's allocator
  // domain: GPipe keeps all M = 8 micro-batches' activations, 1F1B at most P - s.
  std::map<std::string, nlohmann::json> lines;
  for (const std::string s : {"gpipe", "1f1b"})
    lines[s] = dtrain(kGpt + "--max-steps 2 --batch-size 16 --pipeline-stages 2 --micro-batches 8 "
                      "--pipeline-schedule " + s, s).line;
  for (int stage : {0, 1}) {
    const auto& g = lines["gpipe"].at("memory_per_rank").at(stage);
    const auto& f = lines["1f1b"].at("memory_per_rank").at(stage);
    EXPECT_GT(g.at("activations_peak").get<double>(), 1.5 * f.at("activations_peak").get<double>())
        << "stage " << stage << ": gpipe " << g << ", 1f1b " << f;
  }
  EXPECT_EQ(lines["1f1b"].at("memory_per_rank").size(), 2u);
}

TEST(PipelineUsage, BadFlagsAreOneLineErrors) {
  const std::string base = std::string(DTRAIN_BIN) + kMlp + "--max-steps 2 ";
  expectError(runShell(base + "--batch-size 10 --pipeline-stages 2 --micro-batches 4"), 2,
              "--batch-size 10 is not divisible by --micro-batches 4");
  expectError(runShell(base + "--workers 3 --pipeline-stages 2"), 2,
              "--workers 3 is not a multiple of --pipeline-stages 2");
  expectError(runShell(base + "--pipeline-stages 2 --pipeline-split 1,2"), 2,
              "--pipeline-split needs 1 cut points");
  expectError(runShell(base + "--pipeline-stages 2 --pipeline-split 9"), 2,
              "--pipeline-split: cut points must increase");
  expectError(runShell(base + "--pipeline-stages 7"), 2, "this model has only 6 layers");
  expectError(runShell(base + "--pipeline-stages 2 --accumulate 2"), 2,
              "--accumulate does not combine with --pipeline-stages");
  expectError(runShell(base + "--pipeline-stages 2 --pipeline-schedule zigzag"), 2,
              "unknown --pipeline-schedule 'zigzag'");
  expectError(runShell(base + "--micro-batches 2"), 2, "--micro-batches applies to --pipeline-stages P > 1");
  expectError(runShell(base + "--virtual-stages 2"), 2, "--virtual-stages applies to --pipeline-stages P > 1");
  expectError(runShell(base + "--pipeline-stages 2 --micro-batches 4 --virtual-stages 2 --pipeline-schedule gpipe"),
              2, "--virtual-stages interleaves the 1f1b schedule (not gpipe)");
  expectError(runShell(base + "--batch-size 12 --pipeline-stages 2 --micro-batches 3 --virtual-stages 2"), 2,
              "--virtual-stages needs --micro-batches a multiple of --pipeline-stages (3 micro-batches, 2 stages)");
  expectError(runShell(base + "--pipeline-stages 2 --micro-batches 4 --virtual-stages 4"), 2,
              "--pipeline-stages x --virtual-stages = 8 stages: this model has only 6 layers");
  expectError(runShell(base + "--pipeline-stages 2 --micro-batches 4 --virtual-stages 2 --pipeline-split 2"), 2,
              "--pipeline-split needs 3 cut points for 4 model chunks (got 1)");
  expectError(runShell(base + "--pipeline-stages 2 --virtual-stages 0"), 2, "--virtual-stages must be >= 1");
  expectError(runShell(base + "--pipeline-stages 2 --strategy ps"), 2, "drop --strategy ps");
}

TEST(PipelineFailure, AStageThatFailsEndsTheRunWithItsError) {
  // The last stage's loss diverges; the first stage, waiting on the pipeline's
  // sub-communicator, must learn of it rather than wait for its timeout.
  CliResult r = runShell(std::string(DTRAIN_BIN) + kMlp + "--max-steps 30 --batch-size 16 "
                         "--pipeline-stages 2 --micro-batches 4 --lr 1e8");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("loss became NaN"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

#ifdef DTRAIN_MPIEXEC
TEST_F(Pipeline, MpiBackendEqualsOneProcess) {
  const Finished mlpRef = dtrain(kMlp + "--max-steps 20 --batch-size 16", "mlp");
  const Finished mlp = train(mpirun(2), kMlp + "--backend mpi --max-steps 20 --batch-size 16 "
                        "--pipeline-stages 2 --micro-batches 4 --pipeline-schedule 1f1b", dir_, "mlp-mpi");
  expectClose(mlp.params, mlpRef.params, 1e-5, "mlp mpi pp=2 1f1b");
  EXPECT_EQ(mlp.line.at("backend"), "mpi");
  const Finished gptRef = dtrain(kGpt + "--max-steps 6 --batch-size 4", "gpt");
  const Finished gpt = train(mpirun(2), kGpt + "--backend mpi --max-steps 6 --batch-size 4 "
                        "--pipeline-stages 2 --micro-batches 2 --pipeline-schedule gpipe", dir_, "gpt-mpi");
  expectClose(gpt.params, gptRef.params, 1e-5, "gpt-tiny mpi pp=2 gpipe");
  const Finished interleaved = train(mpirun(2), kGpt + "--backend mpi --max-steps 6 --batch-size 4 "
                                "--pipeline-stages 2 --micro-batches 2 --virtual-stages 2", dir_, "v-mpi");
  expectClose(interleaved.params, gptRef.params, 1e-5, "gpt-tiny mpi pp=2 v=2");
}
#endif

}  // namespace
}  // namespace dtrain::test
