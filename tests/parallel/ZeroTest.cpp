// ZeRO stages 1, 2 and 3 (parallel/zero/): every stage ends with the same
// parameters and optimizer state (gathered by --save) as plain allreduce, on
// both backends, for mlp and gpt-tiny; --clip-grad-norm sees the global norm;
// --load restores the sharded state; the model states per rank in
// memory_per_rank follow ZeRO's Figure 1; bytes sent per step match allreduce;
// stage 3 gathers the model for --eval-every and --checkpoint-every and
// works with --recompute; unsupported combinations are usage errors.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "TestData.h"
#include "cli/CliRunner.h"
#include "parallel/ParallelTestUtil.h"
#include "runtime/Safetensors.h"

namespace dtrain::test {
namespace {

const std::string kMlp =
    " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 --max-steps 8 "
    "--batch-size 16 --optimizer adam --lr 0.01 --weight-decay 1e-3 --seed 7 --progress off "
    "--fusion-mb 0.05 ";

std::string gptArgs(const std::string& dir) {
  const std::string text = dir + "/text.txt";
  std::ofstream(text) << sampleText(20000, 12345);
  return " train --model gpt-tiny --text-file " + text +
         " --max-steps 6 --batch-size 4 --seed 3 --eval-batches 1 --progress off "
         "--fusion-mb 0.05 ";
}

Params loadAll(const std::string& path) { return loadCheckpointTensors(path); }

nlohmann::json run(const std::string& command) {
  auto r = runShell(command);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.lastLine());
}

int64_t modelStates(const nlohmann::json& rank) {
  return rank.at("parameters").get<int64_t>() + rank.at("gradients").get<int64_t>() +
         rank.at("optimizer_state").get<int64_t>();
}

// Plain allreduce vs --zero 1, 2 and 3 with N local workers: same checkpoint
// (parameters and the full optimizer state), and per rank model states within
// 5% of 16P, 4P + 4P + 8P/N, 4P + 12P/N, 16P/N.
void checkLocal(const std::string& args, int n, const std::string& what) {
  const std::string dir = tempDir();
  const std::string base = std::string(DTRAIN_BIN) + args + " --workers " + std::to_string(n);
  auto plain = run(base + " --save " + dir + "/plain.safetensors");
  ASSERT_FALSE(plain.is_null());
  const Params ref = loadAll(dir + "/plain.safetensors");
  // P: the trained parameters, those with optimizer state (a checkpoint also
  // holds buffers).
  int64_t p = 0;
  for (auto& [name, v] : ref)
    if (name.rfind("optimizer.", 0) != 0 && ref.count("optimizer." + name + ".exp_avg"))
      p += static_cast<int64_t>(v.size());
  ASSERT_GT(p, 0);
  ASSERT_EQ(plain.at("memory_per_rank").size(), static_cast<size_t>(n));
  const double sent = plain.at("bytes_sent_per_worker").get<double>();
  const double expected[4] = {16.0 * p, 8.0 * p + 8.0 * p / n, 4.0 * p + 12.0 * p / n,
                              16.0 * p / n};
  for (auto& rank : plain.at("memory_per_rank"))
    EXPECT_NEAR(modelStates(rank), expected[0], 0.05 * expected[0]) << what << " plain " << rank;
  for (int stage : {1, 2, 3}) {
    const std::string file = dir + "/zero" + std::to_string(stage) + ".safetensors";
    auto z = run(base + " --zero " + std::to_string(stage) + " --save " + file);
    ASSERT_FALSE(z.is_null());
    const std::string label = what + " --zero " + std::to_string(stage);
    expectClose(loadAll(file), ref, 1e-5, label);
    ASSERT_EQ(z.at("memory_per_rank").size(), static_cast<size_t>(n)) << label;
    for (auto& rank : z.at("memory_per_rank"))
      EXPECT_NEAR(modelStates(rank), expected[stage], 0.05 * expected[stage]) << label << rank;
    // Reduce-scatter + allgather move what one allreduce moves; stage 3
    // gathers the parameters twice (forward, backward) except the last block
    // and the root unit, which stay gathered between the two: up to 1.5x.
    const double zs = z.at("bytes_sent_per_worker").get<double>();
    if (stage < 3) EXPECT_NEAR(zs, sent, 0.05 * sent) << label;
    else EXPECT_TRUE(zs > 1.05 * sent && zs < 1.51 * sent) << label << ": " << zs << " vs " << sent;
  }
  std::filesystem::remove_all(dir);
}

// `base` (a whole dtrain command line) with plain allreduce and with --zero 2
// and 3 ends with the same checkpoint: parameters and the full optimizer state.
void expectZeroMatchesPlain(const std::string& base, const std::string& what) {
  const std::string dir = tempDir();
  ASSERT_FALSE(run(base + " --save " + dir + "/plain.safetensors").is_null());
  for (int stage : {2, 3}) {
    const std::string file = dir + "/z" + std::to_string(stage) + ".safetensors";
    ASSERT_FALSE(run(base + " --zero " + std::to_string(stage) + " --save " + file).is_null());
    expectClose(loadAll(file), loadAll(dir + "/plain.safetensors"), 1e-5,
                what + " --zero " + std::to_string(stage));
  }
  std::filesystem::remove_all(dir);
}

// LARS and LAMB scale each tensor's update by norms of the whole tensor: with
// 3 workers and small buckets the tensors are cut into pieces on different
// ranks, whose partial norms are summed over the ranks, so every stage ends
// where plain allreduce does (each piece with its own trust ratio would not).
TEST(Zero, LarsAndLambTakeTheirTrustRatiosOverEveryPiece) {
  const std::string lamb = std::string(DTRAIN_BIN) + kMlp + "--workers 3 --optimizer lamb --lr 0.01 --weight-decay 0.01 ";
  const std::string lars = std::string(DTRAIN_BIN) + kMlp +
                           "--workers 3 --optimizer lars --lr 0.5 --momentum 0.9 --weight-decay 1e-4 ";
  for (const auto& [base, what] : {std::pair{lamb, "lamb"}, std::pair{lars, "lars"}}) {
    const std::string dir = tempDir();
    ASSERT_FALSE(run(base + " --save " + dir + "/plain.safetensors").is_null());
    const Params ref = loadAll(dir + "/plain.safetensors");
    for (int stage : {1, 2, 3}) {
      const std::string file = dir + "/z" + std::to_string(stage) + ".safetensors";
      ASSERT_FALSE(run(base + " --zero " + std::to_string(stage) + " --save " + file).is_null());
      expectClose(loadAll(file), ref, 1e-5, std::string(what) + " --zero " + std::to_string(stage));
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(Zero, MlpTwoAndFourWorkersMatchAllreduce) {
  checkLocal(kMlp, 2, "mlp N=2");
  checkLocal(kMlp, 4, "mlp N=4");
}

TEST(Zero, SixteenBitReduceScatterMatchesTheCastAllreduce) {
  // --compress fp16|bf16 with ZeRO 1 and 2: the same casts as the allreduce's
  // cast compressors (1/N first, 16-bit sums per hop), so 2 workers end bitwise
  // where `--compress` alone ends, 4 within the 16-bit rounding of a different
  // summation order; the reduce-scatter moves half the bytes (a step 0.75x).
  const std::string dir = tempDir();
  const std::string sgd = kMlp + " --optimizer sgd --lr 0.05 ";
  for (const char* c : {"fp16", "bf16"})
    for (int n : {2, 4}) {
      const std::string base = std::string(DTRAIN_BIN) + sgd + " --workers " + std::to_string(n) +
                               " --compress " + c;
      auto cast = run(base + " --save " + dir + "/cast.safetensors");
      auto plain = run(std::string(DTRAIN_BIN) + sgd + " --workers " + std::to_string(n));
      ASSERT_FALSE(cast.is_null() || plain.is_null());
      for (int stage : {1, 2}) {
        const std::string label = std::string(c) + " N=" + std::to_string(n) + " --zero " + std::to_string(stage);
        auto z = run(base + " --zero " + std::to_string(stage) + " --save " + dir + "/z.safetensors");
        ASSERT_FALSE(z.is_null()) << label;
        expectClose(loadAll(dir + "/z.safetensors"), loadAll(dir + "/cast.safetensors"),
                    n == 2 ? 1e-7 : 2e-3, label);
        EXPECT_NEAR(z.at("bytes_sent_per_worker").get<double>(),
                    0.75 * plain.at("bytes_sent_per_worker").get<double>(),
                    0.02 * plain.at("bytes_sent_per_worker").get<double>()) << label;
      }
    }
  std::filesystem::remove_all(dir);
}

TEST(Zero, GptTinyMatchesAllreduce) {
  const std::string dir = tempDir();
  checkLocal(gptArgs(dir), 2, "gpt-tiny N=2");
  std::filesystem::remove_all(dir);
}

TEST(Zero, ThreeWorkersSgdAndAccumulationMatchAllreduce) {
  // N = 3 pads every bucket; sgd's momentum and --accumulate go through the same slices.
  expectZeroMatchesPlain(std::string(DTRAIN_BIN) +
                             " train --model mlp --dataset synthetic --synthetic-size 512 "
                             "--epochs 100 --max-steps 6 --batch-size 8 --progress off --workers 3 "
                             "--fusion-mb 0.05 --optimizer sgd --momentum 0.9 --weight-decay 1e-3 "
                             "--accumulate 2",
                         "N=3 sgd --accumulate 2");
}

TEST(Zero, ClippingSeesTheGlobalNorm) {
  // A low threshold clips every step: a per-shard norm would clip differently.
  expectZeroMatchesPlain(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --clip-grad-norm 0.05",
                         "clip");
}

TEST(Zero, LoadRestoresTheShardedState) {
  // 4 + 4 steps with a checkpoint between equal 8 steps (plain allreduce).
  const std::string dir = tempDir();
  std::string args = kMlp;
  args.replace(args.find("--max-steps 8"), 13, "--max-steps 4");
  const std::string base = std::string(DTRAIN_BIN) + args + " --workers 2";
  ASSERT_FALSE(run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --save " + dir + "/ref.safetensors")
                   .is_null());
  for (const std::string stage : {"2", "3"}) {
    ASSERT_FALSE(run(base + " --zero " + stage + " --save " + dir + "/half.safetensors").is_null());
    ASSERT_FALSE(run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --zero " + stage + " --load " +
                     dir + "/half.safetensors --save " + dir + "/resumed.safetensors")
                     .is_null());
    expectClose(loadAll(dir + "/resumed.safetensors"), loadAll(dir + "/ref.safetensors"), 1e-5,
                "--zero " + stage + " resumed");
  }
  std::filesystem::remove_all(dir);
}

TEST(Zero, Stage3GathersForEvaluationCheckpointsAndRecompute) {
  // gpt-tiny: blocks gathered one at a time around recomputed forwards; the
  // whole model gathered to the reporter every 2 steps (evaluations) and
  // at each periodic checkpoint; the same run as plain allreduce.
  const std::string dir = tempDir();
  const std::string base = std::string(DTRAIN_BIN) + gptArgs(dir) +
                           " --workers 2 --recompute blocks --eval-every 2 --checkpoint-every 4 ";
  auto plain = run(base + " --checkpoint-dir " + dir + "/plain --save " + dir +
                   "/plain.safetensors --metrics " + dir + "/plain.jsonl");
  auto z = run(base + " --zero 3 --checkpoint-dir " + dir + "/z --save " + dir +
               "/z.safetensors --metrics " + dir + "/z.jsonl");
  ASSERT_FALSE(plain.is_null());
  ASSERT_FALSE(z.is_null());
  expectClose(loadAll(dir + "/z.safetensors"), loadAll(dir + "/plain.safetensors"), 1e-5,
              "gpt-tiny --zero 3 --recompute blocks");
  const std::string step4 = "/step-000000004.safetensors";
  expectClose(loadAll(dir + "/z" + step4), loadAll(dir + "/plain" + step4), 1e-5,
              "gpt-tiny --zero 3 periodic checkpoint");
  EXPECT_NEAR(z.at("val_loss").get<double>(), plain.at("val_loss").get<double>(), 1e-4);
  // The evaluations during training (steps 2 and 4) saw the same model.
  auto evaluations = [](const std::string& path) {
    std::vector<double> losses;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      auto rec = nlohmann::json::parse(line);
      if (rec.contains("val_loss")) losses.push_back(rec["val_loss"].get<double>());
    }
    return losses;
  };
  const auto zl = evaluations(dir + "/z.jsonl"), pl = evaluations(dir + "/plain.jsonl");
  ASSERT_EQ(zl.size(), pl.size());
  ASSERT_GE(zl.size(), 3u);
  for (size_t i = 0; i < zl.size(); ++i) EXPECT_NEAR(zl[i], pl[i], 1e-4) << "evaluation " << i;
  std::filesystem::remove_all(dir);
}

TEST(Zero, LoraAdaptersShardLikeAnyTrainedParameter) {
  // Only the adapters are trained: every stage shards them (stage 3 gathers
  // them by block) and leaves the frozen base whole, equal to plain allreduce.
  const std::string dir = tempDir();
  const std::string base = std::string(DTRAIN_BIN) + gptArgs(dir) + " --workers 2 --lora-rank 2 --lr 0.01 ";
  auto plain = run(base + " --save " + dir + "/plain.safetensors");
  ASSERT_FALSE(plain.is_null());
  for (const std::string stage : {"1", "3"}) {
    auto z = run(base + " --zero " + stage + " --save " + dir + "/z.safetensors");
    ASSERT_FALSE(z.is_null());
    expectClose(loadAll(dir + "/z.safetensors"), loadAll(dir + "/plain.safetensors"), 1e-6,
                "LoRA --zero " + stage);
    EXPECT_EQ(z.at("allreduce_bytes"), plain.at("allreduce_bytes"));  // the adapters only
  }
  std::filesystem::remove_all(dir);
}

TEST(Zero, EveryStrategyReportsMemoryPerRank) {
  auto single = run(std::string(DTRAIN_BIN) + withoutFusion(kMlp));
  ASSERT_EQ(single.at("memory_per_rank").size(), 1u);
  EXPECT_GT(single.at("memory_per_rank")[0].at("activations_peak").get<int64_t>(), 0);
  EXPECT_GT(single.at("memory_per_rank")[0].at("optimizer_state").get<int64_t>(), 0);
  auto hog = run(std::string(DTRAIN_BIN) + withoutFusion(kMlp) + " --workers 2 --strategy hogwild");
  ASSERT_EQ(hog.at("memory_per_rank").size(), 2u);
  auto ps = run(std::string(DTRAIN_BIN) + withoutFusion(kMlp) + " --workers 2 --strategy ps");
  ASSERT_GE(ps.at("memory_per_rank").size(), 1u);
}

TEST(Zero, UnsupportedCombinationsAreUsageErrors) {
  expectError(runDtrain(kMlp + "--workers 2 --zero 1 --compress topk"), 2,
              "--zero cannot be combined with --compress topk yet (fp16 and bf16 do");
  expectError(runDtrain(kMlp + "--workers 2 --zero 3 --compress fp16"), 2,
              "--zero 3 does not combine with --compress yet");
  expectError(runDtrain(withoutFusion(kMlp) + "--workers 2 --zero 1 --strategy ps"), 2, "--zero");
  expectError(runDtrain(kMlp + "--workers 2 --zero 4"), 2, "--zero must be in [0, 3] (got 4)");
  expectError(runDtrain(kMlp + "--workers 2 --zero 3 --optimizer lars --offload optimizer"), 2,
              "--zero with --optimizer lars cannot --offload optimizer yet");
  expectError(runDtrain(withoutFusion(kMlp) + "--zero 1"), 2, "--zero");
}

#ifdef DTRAIN_MPIEXEC
TEST(Zero, MpiMatchesLocalAllreduce) {
  const std::string dir = tempDir();
  ASSERT_FALSE(run(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --save " + dir + "/ref.safetensors")
                   .is_null());
  auto z = run(mpirun(2) + kMlp + " --backend mpi --zero 2 --save " + dir + "/z.safetensors");
  ASSERT_FALSE(z.is_null());
  EXPECT_EQ(z.at("memory_per_rank").size(), 2u);
  expectClose(loadAll(dir + "/z.safetensors"), loadAll(dir + "/ref.safetensors"), 1e-5,
              "mpi --zero 2");
  // gpt-tiny, stage 1.
  const std::string gpt = gptArgs(dir);
  ASSERT_FALSE(
      run(std::string(DTRAIN_BIN) + gpt + " --workers 2 --save " + dir + "/gref.safetensors").is_null());
  ASSERT_FALSE(run(mpirun(2) + gpt + " --backend mpi --zero 1 --save " + dir + "/gz.safetensors")
                   .is_null());
  expectClose(loadAll(dir + "/gz.safetensors"), loadAll(dir + "/gref.safetensors"), 1e-5,
              "mpi gpt-tiny --zero 1");
  ASSERT_FALSE(run(mpirun(2) + gpt + " --backend mpi --zero 3 --save " + dir + "/g3.safetensors")
                   .is_null());
  expectClose(loadAll(dir + "/g3.safetensors"), loadAll(dir + "/gref.safetensors"), 1e-5,
              "mpi gpt-tiny --zero 3");
  // The 16-bit reduce-scatter: MPI cannot sum 16-bit floats, dtrain's ring does
  // (as for the cast allreduce); bitwise the local run.
  for (const char* c : {"fp16", "bf16"}) {
    const std::string args = kMlp + " --zero 2 --compress " + c;
    ASSERT_FALSE(run(std::string(DTRAIN_BIN) + args + " --workers 2 --save " + dir + "/hl.safetensors").is_null());
    ASSERT_FALSE(run(mpirun(2) + args + " --backend mpi --save " + dir + "/hm.safetensors").is_null());
    expectClose(loadAll(dir + "/hm.safetensors"), loadAll(dir + "/hl.safetensors"), 1e-7,
                std::string("mpi --zero 2 --compress ") + c);
  }
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace dtrain::test

namespace dtrain::test {
namespace {
// The same result line under every strategy: ZeRO reports the step's compute
// and communication times and bytes as plain allreduce does.
TEST(Zero, ReportsTheTimingsOfAllreduce) {
  for (const char* stage : {"1", "2", "3"}) {
    auto r = runShell(std::string(DTRAIN_BIN) + kMlp + " --workers 2 --zero " + stage);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto line = nlohmann::json::parse(r.lastLine());
    for (const char* k : {"compute_ms", "comm_ms", "hidden_ms", "exposed_comm_ms",
                          "bytes_sent_per_worker", "bytes_received_per_worker"}) {
      ASSERT_TRUE(line.contains(k)) << "--zero " << stage << " lacks " << k;
      EXPECT_GE(line.at(k).get<double>(), 0.0) << k;
    }
    EXPECT_GT(line.at("compute_ms").get<double>(), 0.0);
    EXPECT_GT(line.at("bytes_received_per_worker").get<double>(), 0.0);
    // Communication is what was hidden under backward plus what was not.
    EXPECT_NEAR(line.at("comm_ms").get<double>(),
                line.at("hidden_ms").get<double>() + line.at("exposed_comm_ms").get<double>(), 1e-6);
  }
}
}  // namespace
}  // namespace dtrain::test
