// Sufficient factor broadcasting (--sfb; parallel/allreduce/SufficientFactors.h):
// with --sfb on and auto, kWorkers = 2 workers end where plain allreduce ends (up to
// summation order) for the mlp, a wide mlp (--mlp-hidden), gradient
// accumulation, --no-overlap, gpt-tiny's [B, T, C] inputs and the mpi backend,
// with momentum and weight decay; auto picks the layers where B (M+N) < M N;
// the factors' bytes are B (M+N) floats per layer; the refusals are one line.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "TestData.h"
#include "cli/CliRunner.h"
#include "nn/ModelRegistry.h"
#include "parallel/ParallelTestUtil.h"

namespace dtrain::test {
namespace {

constexpr int64_t kWorkers = 2;  // every run here: --workers 2

std::string sfbMlp(const std::string& hidden, int batch) {
  return std::string(DTRAIN_BIN) +
         " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 --max-steps 8 "
         "--optimizer sgd --lr 0.05 --momentum 0.9 --weight-decay 1e-3 --seed 7 --progress off "
         "--workers 2 --batch-size " + std::to_string(batch) +
         (hidden.empty() ? "" : " --mlp-hidden " + hidden) + " ";
}

nlohmann::json runJson(const std::string& command) {
  auto r = runShell(command);
  EXPECT_EQ(r.code, 0) << command << "\n" << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.lastLine());
}

// The mlp's Linear weights as (name, M, N) for 784 features and 10 classes.
struct LinearShape {
  std::string name;
  int64_t m, n;
};
std::vector<LinearShape> mlpLinears(std::vector<int64_t> hidden) {
  std::vector<int64_t> widths{784};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(10);
  std::vector<LinearShape> out;
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    out.push_back({std::to_string(2 * i + 1) + ".weight", widths[i + 1], widths[i]});
  return out;
}

// Plain allreduce vs --sfb on and auto: same parameters and momentum; the
// layers auto picked; the bytes handed to the collectives: B (M+N) floats per
// factor-exchanged weight, every other parameter whole.
void checkAgainstAllreduce(const std::string& hidden, std::vector<int64_t> widths, int batch,
                           const std::string& extra, const std::string& what, int accumulate = 1) {
  const std::string dir = tempDir();
  const std::string base = sfbMlp(hidden, batch) + extra;
  const int64_t rows = int64_t{batch} * accumulate;  // per worker and step
  auto off = runJson(base + " --save " + dir + "/off.safetensors");
  ASSERT_FALSE(off.is_null()) << what;
  EXPECT_FALSE(off.contains("sfb_layers")) << what;
  const Params ref = loadCheckpointTensors(dir + "/off.safetensors");
  const auto linears = mlpLinears(widths);
  double allBytes = 0;
  for (const auto& l : linears) allBytes += 4.0 * (l.m * l.n + l.m);
  EXPECT_DOUBLE_EQ(off.at("compressed_bytes_per_step").get<double>(), allBytes) << what;
  for (const std::string mode : {"on", "auto"}) {
    const std::string label = what + " --sfb " + mode;
    const std::string file = dir + "/" + mode + ".safetensors";
    auto r = runJson(base + " --sfb " + mode + " --save " + file);
    ASSERT_FALSE(r.is_null()) << label;
    expectClose(loadCheckpointTensors(file), ref, 1e-5, label);
    std::vector<std::string> expected;
    double bytes = 0;
    for (const auto& l : linears) {
      const bool sfb = mode == "on" || kWorkers * rows * (l.m + l.n) < 2 * l.m * l.n;
      if (sfb) expected.push_back(l.name);
      bytes += 4.0 * ((sfb ? rows * (l.m + l.n) : l.m * l.n) + l.m);
    }
    EXPECT_EQ(r.at("sfb_layers").get<std::vector<std::string>>(), expected) << label;
    EXPECT_DOUBLE_EQ(r.at("compressed_bytes_per_step").get<double>(), bytes) << label;
    if (bytes < allBytes) {
      EXPECT_LT(r.at("bytes_sent_per_worker").get<double>(),
                off.at("bytes_sent_per_worker").get<double>()) << label;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Sfb, MlpMatchesAllreduce) { checkAgainstAllreduce("", {256, 256}, 16, "", "mlp B=16"); }

TEST(Sfb, WideMlpMatchesAllreduce) {
  checkAgainstAllreduce("1024,1024", {1024, 1024}, 8, "", "mlp 1024,1024 B=8");
}

TEST(Sfb, AccumulationConcatenatesTheMicroBatches) {
  // 4 micro-batches of 4: one exchange of B = 16 rows per step, which auto's rule
  // uses too (the 10x512 output layer: 16 x 522 > 5120 allreduced, 4 x 522 < 5120 would not be).
  checkAgainstAllreduce("512,512", {512, 512}, 4, "--accumulate 4", "mlp 512,512 --accumulate 4", 4);
}

TEST(Sfb, WithoutOverlap) {
  checkAgainstAllreduce("512,512", {512, 512}, 16, "--no-overlap --fusion-mb 0.05",
                        "mlp 512,512 --no-overlap");
}

TEST(Sfb, GptTinyRowsAreTokens) {
  // Every Linear of the transformer sees [B, T, C] inputs: B T rows.
  const std::string dir = tempDir();
  const std::string text = dir + "/text.txt";
  std::ofstream(text) << sampleText(20000, 12345);
  const std::string base = std::string(DTRAIN_BIN) + " train --model gpt-tiny --text-file " + text +
                           " --max-steps 4 --batch-size 2 --seed 3 --eval-batches 1 --progress off "
                           "--workers 2 ";
  ASSERT_FALSE(runJson(base + " --save " + dir + "/off.safetensors").is_null());
  auto on = runJson(base + " --sfb on --save " + dir + "/on.safetensors");
  ASSERT_FALSE(on.is_null());
  EXPECT_FALSE(on.at("sfb_layers").empty());
  expectClose(loadCheckpointTensors(dir + "/on.safetensors"),
              loadCheckpointTensors(dir + "/off.safetensors"), 1e-5, "gpt-tiny --sfb on");
  std::filesystem::remove_all(dir);
}

TEST(Sfb, MlpHiddenSetsTheWidths) {
  nn::ModelOverrides o;
  o.mlpHidden = {32, 16, 8};
  auto m = nn::buildModel("mlp", o, 1);
  std::map<std::string, Shape> shapes;
  for (auto& [name, p] : m->namedParameters()) shapes[name] = p.shape();
  EXPECT_EQ(shapes.at("1.weight"), Shape({32, 784}));
  EXPECT_EQ(shapes.at("3.weight"), Shape({16, 32}));
  EXPECT_EQ(shapes.at("5.weight"), Shape({8, 16}));
  EXPECT_EQ(shapes.at("7.weight"), Shape({10, 8}));
  EXPECT_EQ(shapes.size(), 8u);
  EXPECT_THROW(nn::buildModel("lenet", o, 1), UsageError);
}

TEST(Sfb, RefusedWhereItCannotApply) {
  const std::string base = sfbMlp("", 16);
  expectError(runShell(base + " --sfb auto --compress powersgd"), 2, "--sfb");
  expectError(runShell(base + " --sfb on --zero 1"), 2, "--sfb");
  expectError(runShell(base + " --sfb on --tensor-parallel 2"), 2, "--sfb");
  expectError(runShell(base + " --sfb on --workers 1"), 2, "--sfb");
  expectError(runShell(base + " --sfb sometimes"), 2, "--sfb");
  expectError(runDtrain("train --model lenet --mlp-hidden 64 --progress off"), 2, "--mlp-hidden");
  expectError(runDtrain("train --model mlp --mlp-hidden 64,0 --progress off"), 2, "--mlp-hidden");
}

#ifdef DTRAIN_MPIEXEC
TEST(Sfb, MpiMatchesLocalAllreduce) {
  const std::string dir = tempDir();
  const std::string args =
      " train --model mlp --mlp-hidden 512,512 --dataset synthetic --synthetic-size 512 "
      "--epochs 1000 --max-steps 8 --batch-size 16 --lr 0.05 --momentum 0.9 --weight-decay 1e-3 "
      "--seed 7 --progress off ";
  ASSERT_FALSE(runJson(std::string(DTRAIN_BIN) + args + " --workers 2 --save " + dir +
                       "/ref.safetensors").is_null());
  auto r = runJson(mpirun(2) + args + " --backend mpi --sfb auto --save " + dir + "/mpi.safetensors");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r.at("sfb_layers").get<std::vector<std::string>>(),
            (std::vector<std::string>{"1.weight", "3.weight"}));
  expectClose(loadCheckpointTensors(dir + "/mpi.safetensors"),
              loadCheckpointTensors(dir + "/ref.safetensors"), 1e-5, "mpi --sfb auto");
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace dtrain::test
