// A streamed epoch interrupted at one world size and resumed at another: the sample ids
// (the test shards' features are their ids) of the steps before the checkpoint and after
// the resume, over every rank, hold every sample of the epoch once when the world sizes
// deal the shards evenly (4 -> 2), and never one twice otherwise (2 -> 3, 4 -> 2 -> 3).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data/ShardTestData.h"
#include "data/DataTestUtil.h"
#include "runtime/Task.h"

using namespace dtrain;
using namespace dtrain::runtime;

namespace {

struct Resumable {
  TrainConfig config;
  TaskData data;
  explicit Resumable(const std::string& dir) {
    const auto paths = data::test::writeShardSet(dir, std::vector<int64_t>(12, 10));
    config.dataset = "shards";
    config.trainData = dir + "/train-{0000..0011}.tar";
    config.batchSize = 5;
    config.loaderThreads = 2;
    config.shuffleBuffer = 7;
    config.seed = 3;
    data.trainShards = data::ShardSet::scan(paths, false);
  }
  std::vector<std::unique_ptr<Task>> tasks(int world) {
    std::vector<std::unique_ptr<Task>> out;
    for (int r = 0; r < world; ++r)
      out.push_back(makeTask({config, nn::modelInfo("mlp"), r, world, r == 0}, data));
    return out;
  }
};

// Runs `steps` steps (or until the epoch ends) of epoch 0 on every rank from `state`
// (resumed when it has a step), adding the ids seen; returns the checkpoint state after.
TrainState run(Resumable& d, int world, const TrainState& state, int64_t steps,
               std::multiset<int>& seen, int64_t* stepsRun = nullptr) {
  auto tasks = d.tasks(world);
  TrainState out = state;
  int64_t ran = 0;
  for (auto& t : tasks) {
    const int64_t step = state.step > 0 || !state.metadata.empty() ? t->resumeStep(state).step : 0;
    t->beginEpoch(0, step);
    ran = 0;
    for (data::Batch b; ran < steps && t->nextBatch(b); ++ran)
      for (int64_t i = 0; i < b.size(); ++i) seen.insert(static_cast<int>(b.x.data<float>()[i * 4]));
    out.step = step + ran;
    out.metadata = t->dataPosition();
  }
  out.worldSize = world;
  out.globalBatch = world * 5;
  if (stepsRun) *stepsRun = ran;
  return out;
}

void expectNoneTwice(const std::multiset<int>& seen) {
  for (int id : std::set<int>(seen.begin(), seen.end())) EXPECT_EQ(seen.count(id), 1u) << id;
}

}  // namespace

TEST(ShardResume, FourRanksToTwoSeeEveryRemainingSampleOnce) {
  data::test::TempDir tmp;
  Resumable d(tmp.str());
  std::multiset<int> seen;
  TrainState state = run(d, 4, {}, 2, seen);
  EXPECT_EQ(seen.size(), 40u);
  state.metadata.clear();  // also from a checkpoint that says only its world size
  int64_t ran = 0;
  run(d, 2, state, 100, seen, &ran);
  EXPECT_EQ(ran, 8);
  EXPECT_EQ(seen.size(), 120u);
  expectNoneTwice(seen);
}

TEST(ShardResume, OtherWorldSizesNeverRepeatASample) {
  data::test::TempDir tmp;
  Resumable d(tmp.str());
  std::multiset<int> seen;
  TrainState state = run(d, 2, {}, 3, seen);
  run(d, 3, state, 100, seen);
  expectNoneTwice(seen);
  EXPECT_GE(seen.size(), 120u - 3 * 10);  // what the ranks' uneven shares drop at most
  std::multiset<int> chained;
  state = run(d, 4, {}, 1, chained);
  state = run(d, 2, state, 2, chained);
  EXPECT_EQ(chained.size(), 40u);
  run(d, 3, state, 100, chained);
  expectNoneTwice(chained);
  EXPECT_GT(chained.size(), 80u);
}
