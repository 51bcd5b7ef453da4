// Start-up broadcast, the timeline, stats, and LARS.
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "nn/Models.h"
#include "optim/Factory.h"
#include "optim/Lars.h"
#include "parallel/ParallelTestUtil.h"
#include "parallel/zero/ZeroDataParallel.h"
#include "runtime/Timeline.h"

namespace dtrain::test {
namespace {

TEST(DataParallelSetup, ReplicasStartFromRankZeroWhateverTheirSeeds) {
  const Params expected = [] {
    auto m = nn::makeModel("lenet", 100);
    return snapshot(*m);
  }();
  comm::local::runLocal(3, [&](comm::Communicator& comm) {
    auto model = nn::makeModel("lenet", 100 + comm.rank());  // different seeds
    auto opt = optim::makeOptimizer("sgd", model->namedParameters(), {});
    parallel::DataParallel dp(comm);
    dp.setup(*model, *opt);
    EXPECT_EQ(snapshot(*model), expected) << "rank " << comm.rank();
  });
}

TEST(DataParallelSetup, OptimizerStateIsBroadcastToo) {
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    auto model = nn::makeModel("mlp", 1);
    optim::OptimizerOptions oo;
    oo.momentum = 0.9;
    auto opt = optim::makeOptimizer("sgd", model->namedParameters(), oo);
    if (comm.rank() == 0) {  // as if rank 0 alone had loaded a checkpoint
      opt->ensureState();
      for (auto& [name, t] : opt->namedState())
        if (t->dtype() == DType::F32) t->fill(0.5f);
      opt->setStepCount(7);
    }
    parallel::DataParallel dp(comm);
    dp.setup(*model, *opt);
    EXPECT_EQ(opt->stepCount(), 7);
    ASSERT_TRUE(opt->hasState(0));
    for (auto& [name, t] : opt->namedState())
      if (t->dtype() == DType::F32) {
        EXPECT_EQ(t->toVector()[0], 0.5f) << name;
      }
  });
}

TEST(DataParallelStats, ReportCommunicationFigures) {
  auto c = smallConfig("mlp", 16);
  c.maxSteps = 5;
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, std::make_unique<parallel::DataParallel>(comm));
    t.setData(train, test);
    auto r = t.run();
    const auto& s = r.strategyStats;
    for (const char* k : {"compute_ms", "comm_ms", "hidden_ms", "exposed_comm_ms",
                          "bytes_sent_per_worker", "buckets"})
      ASSERT_TRUE(s.count(k)) << k;
    EXPECT_GT(s.at("comm_ms"), 0);
    EXPECT_LE(s.at("hidden_ms"), s.at("comm_ms") + 1e-9);
    // 2 workers: a bandwidth-optimal allreduce sends the payload once per rank.
    EXPECT_DOUBLE_EQ(s.at("bytes_sent_per_worker"), s.at("allreduce_bytes"));
    int64_t params = t.model().parameterCount();
    EXPECT_DOUBLE_EQ(s.at("allreduce_bytes"), 4.0 * params);
  });
}

namespace {

// The timeline spans (name per rank, bucket spans as "allreduce") of 3 steps
// of the mlp on 2 local ranks under `strategy`.
std::set<std::pair<int, std::string>> timelineSpans(
    const std::function<std::unique_ptr<parallel::Strategy>(comm::Communicator&)>& strategy) {
  auto c = smallConfig("mlp", 16);
  c.maxSteps = 3;
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  runtime::Timeline timeline;
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, strategy(comm));
    t.setData(train, test);
    t.setTimeline(&timeline);
    t.run();
  });
  const std::string path =
      (std::filesystem::temp_directory_path() / ("dtrain_timeline_" + std::to_string(::getpid()) + ".json")).string();
  timeline.write(path);
  std::ifstream f(path);
  auto doc = nlohmann::json::parse(f);
  std::filesystem::remove(path);
  std::set<std::pair<int, std::string>> seen;
  for (auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    EXPECT_GE(e.at("dur").get<double>(), 0);
    std::string name = e.at("name");
    if (name.rfind("allreduce bucket", 0) == 0) {
      EXPECT_EQ(e.at("tid"), 1);
      name = "allreduce";
    }
    seen.insert({e.at("pid").get<int>(), name});
  }
  return seen;
}

}  // namespace

TEST(Timeline, SpansOfEveryRankAndBucket) {
  using StrategyPtr = std::unique_ptr<parallel::Strategy>;
  const auto seen = timelineSpans(
      [](comm::Communicator& comm) -> StrategyPtr { return std::make_unique<parallel::DataParallel>(comm); });
  for (int rank : {0, 1})
    for (const char* n : {"data", "forward", "backward", "optimizer", "allreduce"})
      EXPECT_TRUE(seen.count({rank, n})) << "rank " << rank << " " << n;
}

TEST(Timeline, ZeroShowsItsGathers) {
  using StrategyPtr = std::unique_ptr<parallel::Strategy>;
  const auto seen = timelineSpans([](comm::Communicator& comm) -> StrategyPtr {
    return std::make_unique<parallel::zero::ZeroDataParallel>(comm,
                                                             parallel::zero::ZeroOptions{.stage = 1});
  });
  for (int rank : {0, 1})
    for (const char* n : {"forward", "backward", "optimizer", "allgather parameters"})
      EXPECT_TRUE(seen.count({rank, n})) << "rank " << rank << " " << n;
}

TEST(Lars, OneStepFollowsTheTrustRatio) {
  autograd::Variable w(Tensor::fromVector({3, 4}, {2}), true);
  w.zeroGrad();
  w.grad().copyFrom(Tensor::fromVector({0.6f, 0.8f}, {2}));
  optim::OptimizerOptions o;
  o.lr = 2.0;
  o.momentum = 0.9;
  o.weightDecay = 0.1;
  auto lars = optim::makeOptimizer("lars", {{"w", w}}, o);
  lars->step();
  // ||w|| = 5, ||g|| = 1: trust = 0.001 * 5 / (1 + 0.1 * 5) = 1/300.
  const double trust = 0.001 * 5 / 1.5;
  const double d0 = 0.6 + 0.1 * 3, d1 = 0.8 + 0.1 * 4;
  EXPECT_NEAR(w.data().toVector()[0], 3 - 2 * trust * d0, 1e-6);
  EXPECT_NEAR(w.data().toVector()[1], 4 - 2 * trust * d1, 1e-6);
  lars->step();  // momentum: v = 0.9 v + lr * trust' * d'
  EXPECT_LT(w.data().toVector()[0], 3 - 2 * 2 * trust * d0 * 0.9);
}

TEST(Lars, RejectsOptionsItDoesNotHave) {
  optim::OptimizerOptions o;
  o.beta1 = 0.9;
  EXPECT_THROW(optim::makeOptimizer("lars", {}, o), UsageError);
}

}  // namespace
}  // namespace dtrain::test
