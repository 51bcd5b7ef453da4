// Hogwild!: ranks (threads of the local backend) share one parameter set.
//   - setup: every rank's parameters and buffers become rank 0's (same storage,
//     rank 0's values, whatever the other ranks' seeds);
//   - every rank's update lands in the shared storage and the next gradient of
//     any rank is computed from it (ranks take turns, so the result is exact);
//   - through the Trainer: one parameter set, stats and the per-worker report;
//   - convergence: mlp on Fashion-MNIST, 4 workers, >= 85% test accuracy.
// The races are intentional, so under ThreadSanitizer every test skips itself.
#include <cmath>
#include <filesystem>

#include "autograd/Ops.h"
#include "core/Rng.h"
#include "core/ThreadPool.h"
#include "core/Timer.h"
#include "nn/Models.h"
#include "optim/Factory.h"
#include "parallel/ParallelTestUtil.h"
#include "parallel/hogwild/Hogwild.h"
#include "tensor/cpu/Blas.h"

// Under ThreadSanitizer the lock-free update is unchecked by name
// (Hogwild.cpp: HogwildRaceByDesign); everything else these tests do is checked.
#define SKIP_UNDER_TSAN() (void)0

namespace dtrain::test {
namespace {

using autograd::Variable;

// A module with a parameter and a buffer (no built-in model has buffers).
class WithBuffer final : public nn::Module {
 public:
  explicit WithBuffer(float v) {
    w = registerParameter("w", Tensor::full({4, 3}, v));
    running = &registerBuffer("running", Tensor::full({3}, 10 * v));
  }
  Variable forward(const Variable& x) override { return x; }
  std::string describe() const override { return "WithBuffer"; }
  Variable w;
  Tensor* running;
};

TEST(HogwildSetup, RanksShareRankZerosStorageAndValues) {
  SKIP_UNDER_TSAN();
  constexpr int kRanks = 3;
  const Params expected = snapshot(*nn::makeModel("mlp", 100));
  auto shared = std::make_shared<parallel::HogwildShared>(kRanks);
  std::vector<std::vector<const float*>> ptrs(kRanks);
  std::vector<Params> values(kRanks);
  const float* rank0Before = nullptr;
  comm::local::runLocal(kRanks, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    auto model = nn::makeModel("mlp", 100 + r);  // different seeds: rank 0's must win
    auto opt = optim::makeOptimizer("sgd", model->namedParameters(), {});
    if (r == 0) rank0Before = model->namedParameters()[0].second.data().data<float>();
    parallel::Hogwild hw(comm, shared);
    hw.setup(*model, *opt);
    for (auto& [name, p] : model->namedParameters()) ptrs[r].push_back(p.data().data<float>());
    values[r] = snapshot(*model);
    // The optimizer holds the same Variables, so it updates the shared tensors.
    EXPECT_EQ(opt->param(0).data().data<float>(), ptrs[r][0]) << "rank " << r;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(values[r], expected) << "rank " << r << " does not start from rank 0's values";
    ASSERT_EQ(ptrs[r].size(), ptrs[0].size());
    for (size_t i = 0; i < ptrs[0].size(); ++i)
      EXPECT_EQ(ptrs[r][i], ptrs[0][i]) << "rank " << r << " parameter " << i << " is a copy";
  }
  EXPECT_EQ(shared->get("param:1.weight").data<float>(), ptrs[0][0]);
  EXPECT_NE(rank0Before, ptrs[0][0]) << "rank 0 should publish clones, not its own tensors";
  EXPECT_EQ(shared->names().size(), ptrs[0].size());
}

TEST(HogwildSetup, BuffersAreSharedToo) {
  SKIP_UNDER_TSAN();
  auto shared = std::make_shared<parallel::HogwildShared>(2);
  std::vector<float> seenByRank0;
  std::vector<const float*> bufPtrs(2);
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    WithBuffer m(static_cast<float>(r + 1));
    auto opt = optim::makeOptimizer("sgd", m.namedParameters(), {});
    parallel::Hogwild hw(comm, shared);
    hw.setup(m, *opt);
    bufPtrs[r] = m.running->data<float>();
    EXPECT_EQ(m.w.data().toVector(), std::vector<float>(12, 1.f)) << "rank " << r;
    EXPECT_EQ(m.running->toVector(), std::vector<float>(3, 10.f)) << "rank " << r;
    comm.barrier();
    if (r == 1) m.running->fill(7.f);  // as a BatchNorm's running statistics would
    comm.barrier();
    if (r == 0) seenByRank0 = m.running->toVector();
  });
  EXPECT_EQ(bufPtrs[0], bufPtrs[1]);
  EXPECT_EQ(seenByRank0, std::vector<float>(3, 7.f));
}

TEST(HogwildSetup, DifferentModelsAreRejected) {
  SKIP_UNDER_TSAN();
  auto shared = std::make_shared<parallel::HogwildShared>(2);
  try {
    comm::local::runLocal(2, [&](comm::Communicator& comm) {
      auto model = nn::makeModel(comm.rank() == 0 ? "mlp" : "lenet", 1);
      auto opt = optim::makeOptimizer("sgd", model->namedParameters(), {});
      parallel::Hogwild hw(comm, shared);
      hw.setup(*model, *opt);
    });
    FAIL() << "rank 1 adopted parameters of another model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no shared tensor 'param:0.weight'"), std::string::npos)
        << e.what();
  }
}

// As the launcher does for ranks that share the process (Trainer leaves it to
// the launcher when ownsProcess() is false): one intra-op and one BLAS thread
// per rank. OpenBLAS's default, a thread per core for every rank, made the
// convergence test ~8x slower: 4 ranks on 2 cores spinning against each other.
void oneThreadPerRank() {
  setNumThreads(1);
  kernels::setBlasThreads(1);
}

// One batch of mlp input, fixed by seed.
std::pair<Tensor, Tensor> randomBatch(uint64_t seed, int64_t n) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n * 784));
  for (auto& v : x) v = rng.uniform();
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (auto& v : y) v = static_cast<int32_t>(rng.uniform() * 10) % 10;
  return {Tensor::fromVector(x, {n, 1, 28, 28}), Tensor::fromInts(y, {n})};
}

void sgdStep(nn::Module& m, optim::Optimizer& opt, const std::pair<Tensor, Tensor>& b) {
  m.zeroGrad();
  autograd::crossEntropy(m.forward(Variable(b.first)), b.second).backward();
  opt.step();
}

optim::OptimizerOptions plainSgd() {
  optim::OptimizerOptions o;
  o.lr = 0.5;
  o.momentum = 0.0;
  return o;
}

// Ranks take turns (a barrier between steps), so there is no race and the
// result is exact: rank 0 on batch A, rank 1 on batch B, A, B, ... must equal
// one model stepping A, B, A, B: each rank's update lands in the shared
// parameters AND each rank's next gradient is computed from the others'
// updates. It fails if a rank updates a private copy (the result is then
// A, A, ... or B, B, ...), or computes from stale parameters.
TEST(HogwildUpdates, EveryRanksUpdateLandsInTheSharedParameters) {
  SKIP_UNDER_TSAN();
  constexpr int kTurns = 6;
  const auto a = randomBatch(1, 16), b = randomBatch(2, 16);
  auto reference = [&](bool onlyA, bool onlyB) {
    auto m = nn::makeModel("mlp", 3);
    auto opt = optim::makeOptimizer("sgd", m->namedParameters(), plainSgd());
    for (int t = 0; t < kTurns; ++t)
      if ((t % 2 == 0 && !onlyB) || (t % 2 == 1 && !onlyA)) sgdStep(*m, *opt, t % 2 == 0 ? a : b);
    return snapshot(*m);
  };
  const Params interleaved = reference(false, false);
  const Params initial = snapshot(*nn::makeModel("mlp", 3));

  auto shared = std::make_shared<parallel::HogwildShared>(2);
  std::vector<Params> final(2);
  std::vector<int64_t> updates(2);
  nlohmann::json report;
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    auto m = nn::makeModel("mlp", 3 + 10 * r);  // rank 1's own init is discarded
    auto opt = optim::makeOptimizer("sgd", m->namedParameters(), plainSgd());
    parallel::Hogwild hw(comm, shared);
    hw.setup(*m, *opt);
    for (int t = 0; t < kTurns; ++t) {
      if (t % 2 == r) {
        m->zeroGrad();
        autograd::crossEntropy(m->forward(Variable(r == 0 ? a.first : b.first)),
                               r == 0 ? a.second : b.second)
            .backward();
        hw.finishGradients();
        hw.applyUpdate(*opt);
      }
      comm.barrier();
    }
    hw.finish(*m, *opt);
    final[r] = snapshot(*m);
    updates[r] = hw.updates();
    EXPECT_EQ(hw.stats().at("hogwild_overlap_fraction"), 0.0) << "turns cannot overlap";
    if (r == 0) report = hw.report();
  });
  EXPECT_EQ(final[0], interleaved) << "the shared parameters are not A, B, A, B, ...";
  EXPECT_EQ(final[1], final[0]);
  EXPECT_EQ(updates, (std::vector<int64_t>{kTurns / 2, kTurns / 2}));
  EXPECT_EQ(report["hogwild_updates_per_worker"], nlohmann::json({kTurns / 2, kTurns / 2}));
  EXPECT_EQ(shared->totalUpdates(), kTurns);
  // The test can tell: the alternatives are far from the interleaved result.
  auto relDiff = [](const Params& x, const Params& y) {
    double d = 0, n = 0;
    for (const auto& [name, v] : y)
      for (size_t i = 0; i < v.size(); ++i) {
        d += (x.at(name)[i] - v[i]) * double(x.at(name)[i] - v[i]);
        n += double(v[i]) * v[i];
      }
    return std::sqrt(d / n);
  };
  EXPECT_GT(relDiff(reference(true, false), interleaved), 1e-3) << "rank 0 alone";
  EXPECT_GT(relDiff(reference(false, true), interleaved), 1e-3) << "rank 1 alone";
  EXPECT_GT(relDiff(initial, interleaved), 1e-3);
}

// Through the Trainer, unsynchronized: every rank ends with the same (one)
// parameter set, which moved, and the figures count every rank's steps.
TEST(HogwildUpdates, TrainerRunsEveryRankOnOneParameterSet) {
  SKIP_UNDER_TSAN();
  auto c = smallConfig("mlp", 16);
  c.strategy = "hogwild";
  c.workers = 2;
  c.maxSteps = 20;
  c.logEvery = 5;
  oneThreadPerRank();
  const Params initial = snapshot(*nn::makeModel("mlp", c.seed));
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  auto shared = std::make_shared<parallel::HogwildShared>(2);
  std::vector<Params> final(2);
  runtime::TrainResult r0;
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, std::make_unique<parallel::Hogwild>(comm, shared));
    t.setData(train, test);
    auto r = t.run();
    final[comm.rank()] = snapshot(t.model());
    if (comm.rank() == 0) r0 = r;
  });
  EXPECT_EQ(final[1], final[0]);
  for (const auto& [name, v] : final[0]) EXPECT_NE(v, initial.at(name)) << name << " never moved";
  EXPECT_EQ(r0.steps, 20);
  EXPECT_EQ(r0.strategyStats.at("hogwild_updates"), 20);
  EXPECT_EQ(r0.strategyStats.at("hogwild_total_updates"), 40);
  EXPECT_GT(r0.strategyStats.at("hogwild_updates_per_s"), 0);
  EXPECT_EQ(r0.strategyReport["hogwild_updates_per_worker"], nlohmann::json({20, 20}));
  EXPECT_EQ(r0.toJson()["hogwild_updates_per_worker"], nlohmann::json({20, 20}));
}

// mlp on Fashion-MNIST, 4 workers x batch 64, SGD lr 0.05 momentum 0.9 (the
// defaults) with a cosine schedule: >= 85% test accuracy after 3 epochs. Each
// worker takes a quarter of the training set per epoch (234 steps), so 936
// updates of batch 64 land in the shared parameters per epoch, as many as in
// one worker's epoch.
//
// Why cosine (measured on a 2-core machine): with the constant default lr,
// Hogwild reaches 83.1-85.5% after 3 epochs (3 seeds) where one worker reaches
// 85.4-86.0%. Per-thread momentum is not what hurts (each gradient still
// contributes lr/(1-momentum) in total, as in sequential SGD): with momentum 0
// and the same effective step (lr 0.5) one worker reaches 84-86% but Hogwild
// collapses (10%, 46%, 74%). The harm is staleness: a gradient is computed
// from parameters that ~N-1 other updates (more when threads outnumber cores)
// have changed by the time it lands, which acts as extra momentum (Mitliagkas
// et al. 2016) and noise at a large step. Decaying the step removes it at the
// end: with cosine, 86.6-87.5% after 3 epochs in ~70 runs, with or without two
// busy-looping processes competing for the cores; one outlier at 85.4% (2
// epochs: typically 86.3%, one outlier in ~45 runs at 84.6%, hence 3).
TEST(HogwildConvergence, MlpOnFashionMnistWithFourWorkers) {
  SKIP_UNDER_TSAN();
  runtime::TrainConfig c;
  c.model = "mlp";
  c.dataset = "fashion-mnist";
  if (!std::filesystem::exists(c.dataDir)) GTEST_SKIP() << c.dataDir << " is not installed";
  c.strategy = "hogwild";
  c.workers = 4;
  c.batchSize = 64;
  c.schedule = "cosine";
  c.epochs = 3;
  c.seed = 1;
  c.progress = runtime::TrainConfig::Progress::Off;
  c.logEvery = 1000;
  oneThreadPerRank();
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  auto shared = std::make_shared<parallel::HogwildShared>(c.workers);
  runtime::TrainResult r0;
  Timer clock;
  comm::local::runLocal(c.workers, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, std::make_unique<parallel::Hogwild>(comm, shared));
    t.setData(train, test);
    auto r = t.run();
    if (comm.rank() == 0) r0 = r;
  });
  RecordProperty("test_accuracy", std::to_string(r0.testAccuracy));
  RecordProperty("seconds", std::to_string(clock.seconds()));
  RecordProperty("overlap_fraction",
                 std::to_string(r0.strategyStats.at("hogwild_overlap_fraction")));
  EXPECT_GE(r0.testAccuracy, 0.85)
      << "after " << r0.epochs << " epoch(s), " << r0.steps << " steps per worker";
  EXPECT_EQ(shared->totalUpdates(), 4 * r0.steps);
}

}  // namespace
}  // namespace dtrain::test
