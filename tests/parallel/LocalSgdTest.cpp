// Local SGD and DiLoCo (parallel/localsgd/): H = 1 is allreduce data
// parallelism up to summation order, post-local SGD's warm-up is the allreduce
// strategy itself, the outer Nesterov step against a hand computation, a
// resume from a checkpoint between syncs is bitwise, and the refusals.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "nn/Layers.h"
#include "optim/Sgd.h"
#include "parallel/ParallelTestUtil.h"
#include "parallel/localsgd/LocalSgd.h"

namespace dtrain::test {
namespace {

using parallel::localsgd::LocalSgd;
using parallel::localsgd::LocalSgdOptions;

// Every rank's final parameters under local SGD, in-process.
std::vector<Params> runLocalSgd(const runtime::TrainConfig& c, int workers, LocalSgdOptions o) {
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  std::vector<Params> out(workers);
  comm::local::runLocal(workers, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, std::make_unique<LocalSgd>(comm, o));
    t.setData(train, test);
    t.run();
    out[comm.rank()] = snapshot(t.model());
  });
  return out;
}

runtime::TrainConfig plainSgd(const std::string& model) {
  runtime::TrainConfig c = smallConfig(model, 16);
  c.momentum = 0;
  c.weightDecay = 0;
  return c;
}

// Averaging the parameters after every plain SGD step is averaging the
// gradients: p - lr mean(g_i) either way.
TEST(LocalSgd, SyncEveryStepEqualsAllreduce) {
  for (const std::string model : {"mlp", "lenet"}) {
    const auto c = plainSgd(model);
    LocalSgdOptions o;
    o.syncEvery = 1;
    auto local = runLocalSgd(c, 3, o);
    auto ar = runDataParallel(c, 3);
    expectClose(local[0], ar[0], 1e-5, model + " local-sgd H=1 vs allreduce");
    for (int r = 1; r < 3; ++r) EXPECT_EQ(local[r], local[0]) << model << ": rank " << r << " diverged";
  }
  // Momentum and weight decay are linear in the gradient: still the same.
  const auto c = smallConfig("mlp", 16);
  LocalSgdOptions o;
  o.syncEvery = 1;
  expectClose(runLocalSgd(c, 2, o)[0], runDataParallel(c, 2)[0], 1e-5, "mlp momentum 0.9, H=1");
}

// A run that never leaves the warm-up is the allreduce strategy, bitwise; one
// that leaves it at step 20 for H = 1 still matches it.
TEST(LocalSgd, PostLocalWarmupIsAllreduce) {
  const auto c = plainSgd("mlp");
  auto ar = runDataParallel(c, 2);
  LocalSgdOptions o;
  o.syncEvery = 4;
  o.startStep = c.maxSteps;
  EXPECT_EQ(runLocalSgd(c, 2, o)[0], ar[0]);
  o.syncEvery = 1;
  o.startStep = 20;
  auto post = runLocalSgd(c, 2, o);
  expectClose(post[0], ar[0], 1e-5, "post-local H=1 vs allreduce");
  EXPECT_EQ(post[1], post[0]);
}

// A tiny model (one Linear 2 -> 1: three parameters): each rank moves its
// parameters by a known amount, then synchronize(); twice, so that the
// momentum buffer carries over. Nesterov as torch.optim.SGD(nesterov=True):
// buf = mu buf + g; anchor -= lr (g + mu buf), g = anchor - mean(params).
TEST(LocalSgd, DilocoOuterStepMatchesAHandComputation) {
  const double lr = 0.7, mu = 0.9;
  std::vector<std::vector<float>> finalParams(2);
  std::vector<float> start;
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    Rng rng(static_cast<uint64_t>(11 + comm.rank()));  // replicas differ: setup broadcasts rank 0's
    nn::Linear model(2, 1, rng);
    optim::SgdOptions so;
    so.lr = 0.1;
    optim::Sgd inner(model.namedParameters(), so);
    LocalSgdOptions o;
    o.outer.nesterov = true;
    o.outer.lr = lr;
    o.outer.momentum = mu;
    LocalSgd s(comm, o);
    s.setup(model, inner);
    auto params = model.parameters();
    auto flat = [&] {
      std::vector<float> v;
      for (auto& p : params)
        for (float x : p.data().contiguous().toVector()) v.push_back(x);
      return v;
    };
    if (comm.rank() == 0) start = flat();
    // Sync 1: rank r adds (r + 1) * (k + 1) / 8 to element k; sync 2: -(r + 1) * k / 4.
    for (int sync = 0; sync < 2; ++sync) {
      int k = 0;
      for (auto& p : params) {
        float* d = p.data().data<float>();
        for (int64_t i = 0; i < p.data().numel(); ++i, ++k)
          d[i] += sync == 0 ? (comm.rank() + 1) * (k + 1) / 8.0f : -(comm.rank() + 1) * k / 4.0f;
      }
      s.synchronize();
    }
    finalParams[comm.rank()] = flat();
    EXPECT_EQ(s.syncs(), 2);
  });
  ASSERT_EQ(start.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    // Mean moves over the two ranks: 1.5 (k+1)/8, then -1.5 k/4; g is minus that.
    const double g1 = -1.5 * (k + 1) / 8.0, g2 = 1.5 * k / 4.0;
    double a = start[k], buf = g1;
    a -= lr * (g1 + mu * buf);
    buf = mu * buf + g2;
    a -= lr * (g2 + mu * buf);
    EXPECT_NEAR(finalParams[0][k], a, 1e-5) << "element " << k;
    EXPECT_EQ(finalParams[1][k], finalParams[0][k]) << "element " << k;
  }
}

const std::string kLocalSgd = std::string(DTRAIN_BIN) +
                              " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 "
                              "--batch-size 16 --seed 5 --progress off --strategy local-sgd ";

void runLocalSgdOk(const std::string& command) {
  auto r = runShell(command);
  ASSERT_EQ(r.code, 0) << command << "\n" << r.err;
}

// Every tensor of a checkpoint, strategy state included, as bytes.
std::map<std::string, std::vector<float>> everyTensor(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  for (auto& [name, t] : runtime::loadSafetensors(path).tensors) {
    const Tensor c = t.contiguous();
    std::vector<float> v((c.nbytes() + 3) / 4, 0.0f);
    std::memcpy(v.data(), c.rawData(), c.nbytes());
    out[name] = std::move(v);
  }
  return out;
}

// DiLoCo (adamw inside, nesterov outside), H = 4: checkpoints every 3 steps
// fall between syncs (step 9: one local step into a period); resuming from
// step 9 ends bitwise where the straight run does, strategy state included.
TEST(LocalSgd, ResumeBetweenSyncsIsBitwise) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  const std::string run = kLocalSgd + "--workers 2 --optimizer adamw --lr 0.003 --sync-every 4 "
                          "--outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9 ";
  runLocalSgdOk(run + "--max-steps 20 --save " + dir + "/straight.safetensors");
  runLocalSgdOk(run + "--max-steps 10 --checkpoint-every 3 --checkpoint-dir " + ckpt);
  auto saved = everyTensor(ckpt + "/step-000000009.safetensors");
  EXPECT_TRUE(saved.count("strategy.outer.momentum.1.weight"));
  EXPECT_TRUE(saved.count("strategy.rank1.local.1.weight"));  // between syncs
  EXPECT_TRUE(saved.count("strategy.outer.average.1.weight"));
  runLocalSgdOk(run + "--max-steps 20 --resume " + ckpt + "/step-000000009.safetensors --save " + dir +
                "/resumed.safetensors");
  const auto straight = everyTensor(dir + "/straight.safetensors");
  const auto resumed = everyTensor(dir + "/resumed.safetensors");
  ASSERT_EQ(straight.size(), resumed.size());
  for (const auto& [name, v] : straight) EXPECT_EQ(resumed.at(name), v) << name << " differs";

  // Another number of workers: the outer state goes on, every worker starts
  // from the old workers' mean.
  auto three = runShell(kLocalSgd + "--workers 3 --optimizer adamw --lr 0.003 --sync-every 4 "
                        "--outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9 --max-steps 20 "
                        "--load " + ckpt + "/step-000000009.safetensors");
  ASSERT_EQ(three.code, 0) << three.err;
  EXPECT_NE(three.err.find("starts from the old workers' mean parameters (1 local steps"), std::string::npos)
      << three.err;
  // With no step left to run, the 3 workers' final sync is the outer step on
  // the saved state alone: g = anchor - average, Nesterov with the saved buffer.
  runLocalSgdOk(kLocalSgd + "--workers 3 --optimizer adamw --lr 0.003 --sync-every 4 --outer-optimizer nesterov "
                "--outer-lr 0.7 --outer-momentum 0.9 --max-steps 9 --load " + ckpt + "/step-000000009.safetensors "
                "--save " + dir + "/three.safetensors");
  const auto after = everyTensor(dir + "/three.safetensors");
  for (const std::string name : {"1.weight", "1.bias", "5.weight"}) {
    const auto& anchor = saved.at("strategy.outer.anchor." + name);
    const auto& average = saved.at("strategy.outer.average." + name);
    const auto& buf = saved.at("strategy.outer.momentum." + name);
    const auto& model = after.at(name);
    ASSERT_EQ(model.size(), anchor.size());
    double worst = 0;
    for (size_t i = 0; i < anchor.size(); ++i) {
      const double g = static_cast<double>(anchor[i]) - average[i];
      const double b = 0.9 * buf[i] + g;
      worst = std::max(worst, std::abs(model[i] - (anchor[i] - 0.7 * (g + 0.9 * b))));
    }
    EXPECT_LT(worst, 1e-5) << name;
  }
  std::filesystem::remove_all(dir);
}

// The compressed delta: PowerSGD's error-feedback residuals and Q are per rank
// and carried in the checkpoint, so the resume is still bitwise.
TEST(LocalSgd, ResumeWithACompressedDeltaIsBitwise) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  const std::string run = kLocalSgd + "--workers 2 --lr 0.05 --momentum 0.9 --sync-every 2 "
                          "--compress powersgd --compress-rank 2 --compress-start-step 0 ";
  runLocalSgdOk(run + "--max-steps 12 --save " + dir + "/straight.safetensors");
  runLocalSgdOk(run + "--max-steps 8 --checkpoint-every 5 --checkpoint-dir " + ckpt);
  EXPECT_TRUE(everyTensor(ckpt + "/step-000000005.safetensors").count("strategy.rank1.compress.chunk0.residual"));
  runLocalSgdOk(run + "--max-steps 12 --resume " + ckpt + "/step-000000005.safetensors --save " + dir +
                "/resumed.safetensors");
  const auto straight = everyTensor(dir + "/straight.safetensors");
  const auto resumed = everyTensor(dir + "/resumed.safetensors");
  ASSERT_EQ(straight.size(), resumed.size());
  for (const auto& [name, v] : straight) EXPECT_EQ(resumed.at(name), v) << name << " differs";
  std::filesystem::remove_all(dir);
}

// H = 4, 2 workers on Fashion-MNIST: the mlp trains (400 steps of 2 x 32 samples
// reach 0.79; chance is 0.1).
TEST(LocalSgd, TrainsTheMlpOnFashionMnist) {
  auto r = runShell(std::string(DTRAIN_BIN) + " train --model mlp --workers 2 --strategy local-sgd "
                    "--sync-every 4 --batch-size 32 --max-steps 400 --lr 0.1 --progress off");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string last = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  last = last.substr(last.rfind('\n') + 1);
  const auto line = nlohmann::json::parse(last);
  EXPECT_GT(line.at("test_accuracy").get<double>(), 0.75) << last;
  EXPECT_EQ(line.at("syncs").get<double>(), 100);
  EXPECT_EQ(line.at("sync_every").get<double>(), 4);
  EXPECT_GT(line.at("bytes_sent_total").get<double>(), 0);
  EXPECT_GT(line.at("comm_ms").get<double>(), 0);
}

TEST(LocalSgd, UsageErrors) {
  const std::string quick = "train --dataset synthetic --synthetic-size 256 --max-steps 2 --progress off --workers 2 ";
  expectError(runDtrain(quick + "--strategy local-sgd --sync-every 0"), 2, "--sync-every must be >= 1 (got 0)");
  expectError(runDtrain(quick + "--outer-lr 0.5"), 2,
              "--outer-lr does not apply to --strategy allreduce (only to --strategy local-sgd)");
  expectError(runDtrain(quick + "--strategy ps --sync-every 8"), 2, "--sync-every does not apply to --strategy ps");
  expectError(runDtrain(quick + "--strategy local-sgd --outer-optimizer adam"), 2, "--outer-optimizer");
  expectError(runDtrain(quick + "--strategy local-sgd --zero 1"), 2, "--zero applies to the allreduce strategy");
  expectError(runDtrain(quick + "--strategy local-sgd --pipeline-stages 2"), 2, "drop --strategy local-sgd");
}

#ifdef DTRAIN_MPIEXEC
// The mpi backend: 2 processes end where 2 threads do.
TEST(LocalSgd, MpiMatchesLocalThreads) {
  const std::string dir = tempDir();
  const std::string args = " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 "
                           "--batch-size 16 --seed 5 --progress off --strategy local-sgd --sync-every 3 "
                           "--outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9 --lr 0.05 --max-steps 12 ";
  runLocalSgdOk(mpirun(2) + args + "--backend mpi --save " + dir + "/mpi.safetensors");
  runLocalSgdOk(std::string(DTRAIN_BIN) + args + "--workers 2 --save " + dir + "/local.safetensors");
  expectClose(loadModelParams(dir + "/mpi.safetensors"), loadModelParams(dir + "/local.safetensors"), 1e-5,
              "mpi vs local");
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace dtrain::test
