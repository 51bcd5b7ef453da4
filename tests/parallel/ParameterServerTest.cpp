// Parameter servers on the local backend: sync equals allreduce, the SSP
// bound holds (instrumented), backup workers drop exactly b gradients per
// step, checkpoints gather the sharded optimizer state, and faults end in
// either a run that goes on (async, ssp, sync with backups) or an error that
// names the dead rank.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "core/Error.h"
#include "parallel/CpuHog.h"
#include "parallel/PsTestUtil.h"

namespace dtrain::test {
namespace {

using parallel::ps::Consistency;

runtime::TrainConfig psConfig(const std::string& model, int workers, int64_t batch) {
  runtime::TrainConfig c = smallConfig(model, batch);
  c.workers = workers;
  c.strategy = "ps";
  return c;
}

struct SyncCase {
  std::string model;
  int workers, servers;
};

class SyncPs : public ::testing::TestWithParam<SyncCase> {};

TEST_P(SyncPs, MatchesAllreduceWithTheSameGlobalBatch) {
  const auto& p = GetParam();
  runtime::TrainConfig c = psConfig(p.model, p.workers, 16);
  auto ps = runPs(c, psOptions(c, p.servers, Consistency::Sync));
  auto dp = runDataParallel(smallConfig(p.model, 16), p.workers);
  const std::string what = p.model + " W=" + std::to_string(p.workers) + " S=" + std::to_string(p.servers);
  expectClose(ps.params, dp[0], 1e-5, what);
  for (const auto& s : ps.servers) {
    EXPECT_EQ(s.updates, 50) << what;
    EXPECT_EQ(s.dropped, 0) << what;
    EXPECT_EQ(s.staleness[0], 50 * p.workers) << "sync applies only fresh gradients";
  }
}

INSTANTIATE_TEST_SUITE_P(Local, SyncPs,
                         ::testing::Values(SyncCase{"mlp", 2, 1}, SyncCase{"mlp", 3, 2},
                                           SyncCase{"mlp", 4, 3}, SyncCase{"lenet", 2, 2}),
                         [](const auto& info) {
                           return info.param.model + "_W" + std::to_string(info.param.workers) +
                                  "_S" + std::to_string(info.param.servers);
                         });

TEST(SyncPs, DecayOnlyMatricesFollowsTheWholeTensorOfEachSlice) {
  // AdamW with nanoGPT's groups: 3 servers cut mlp's matrices and biases into
  // flat slices; each slice must decay as the tensor it comes from.
  runtime::TrainConfig c = psConfig("mlp", 2, 16);
  c.optimizer = "adamw";
  c.momentum.reset();
  c.lr = 1e-3;
  c.weightDecay = 0.5;  // large, so a wrongly decayed bias shows
  c.decay2dOnly = true;
  auto ps = runPs(c, psOptions(c, 3, Consistency::Sync));
  runtime::TrainConfig d = smallConfig("mlp", 16);
  d.optimizer = c.optimizer, d.momentum = std::nullopt, d.lr = c.lr, d.weightDecay = c.weightDecay, d.decay2dOnly = true;
  expectClose(ps.params, runDataParallel(d, 2)[0], 1e-5, "adamw, decay 2-D only, S=3");
  d.decay2dOnly = false;  // the test can fail: decaying everything differs
  const auto all = runDataParallel(d, 2)[0];
  double diff = 0;
  for (const auto& [name, v] : all)
    for (size_t i = 0; i < v.size(); ++i) diff = std::max(diff, double(std::abs(v[i] - ps.params.at(name)[i])));
  EXPECT_GT(diff, 1e-4);
}

TEST(SyncPs, CheckpointGathersTheShardedOptimizerState) {
  runtime::TrainConfig c = psConfig("mlp", 2, 16);
  c.maxSteps = 10;
  auto ps = runPs(c, psOptions(c, 3, Consistency::Sync));
  // Allreduce keeps the whole state on every rank: the reference.
  runtime::TrainConfig d = smallConfig("mlp", 16);
  d.maxSteps = 10;
  Params ref;
  auto train = runtime::loadDataset(d, true);
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    runtime::Trainer t(d, std::make_unique<parallel::DataParallel>(comm));
    t.setData(train, runtime::loadDataset(d, false));
    t.run();
    if (comm.rank() == 0) ref = stateSnapshot(t.optimizer());
  });
  ASSERT_FALSE(ref.empty());
  expectClose(ps.optimizerState, ref, 1e-5, "momentum buffers");
}

TEST(SspPs, NoWorkerRunsMoreThanStalenessStepsAhead) {
  for (int64_t s : {0, 2}) {
    runtime::TrainConfig c = psConfig("mlp", 3, 16);
    c.maxSteps = 40;
    c.stragglerMs[2] = 10;  // the others race ahead until the bound stops them
    auto o = psOptions(c, 2, Consistency::Ssp);
    o.staleness = s;
    auto run = runPs(c, o);
    for (const auto& st : run.servers) {
      // Instrumented on every push: its step minus the slowest live worker's clock.
      EXPECT_LE(st.sspMaxAhead, s) << "s=" << s;
      EXPECT_EQ(st.updates, 40 * 3) << "ssp applies every push";
    }
    int64_t maxAhead = 0;
    for (const auto& st : run.servers) maxAhead = std::max(maxAhead, st.sspMaxAhead);
    EXPECT_EQ(maxAhead, s) << "the straggler should make the bound bind";
    for (const auto& w : run.workers) EXPECT_LE(w.at("read_staleness_max"), s);
  }
}

TEST(BackupWorkers, EachStepUsesTheFirstWMinusBAndDropsExactlyB) {
  for (int b : {1, 2}) {
    runtime::TrainConfig c = psConfig("mlp", 4, 16);
    c.maxSteps = 30;
    // The last b workers are always late.
    for (int w = 4 - b; w < 4; ++w) c.stragglerMs[w] = 15;
    auto o = psOptions(c, 2, Consistency::Sync);
    o.backupWorkers = b;
    auto run = runPs(c, o);
    for (const auto& st : run.servers) {
      ASSERT_EQ(st.appliedPerStep.size(), 30u);
      for (int64_t n : st.appliedPerStep) EXPECT_EQ(n, 4 - b);
      // Each late worker pushes once per step until the fast ones finish:
      // every step it reached dropped exactly b gradients (one per late worker).
      ASSERT_GT(st.dropped, 0);
      const auto& d = st.droppedPerStep;
      int64_t reached = 0;
      while (reached < static_cast<int64_t>(d.size()) && d[reached] == b) ++reached;
      EXPECT_GE(reached, 1);
      for (size_t t = reached; t < d.size(); ++t) EXPECT_LT(d[t], b) << "step " << t;
      EXPECT_EQ(st.pushes, 30 * (4 - b) + st.dropped);
    }
  }
}

TEST(PsFaults, AsyncAndSspGoOnWithoutAKilledWorker) {
  CpuHog hog;  // every core busy: load must not trip the fault handling
  for (Consistency mode : {Consistency::Async, Consistency::Ssp}) {
    runtime::TrainConfig c = psConfig("mlp", 3, 16);
    c.maxSteps = 60;
    auto o = psOptions(c, 2, mode);
    o.staleness = 1;
    // Heartbeats every 0.2 s keep the live workers alive (PsLivenessTest).
    o.timeoutS = 2;
    auto run = runPs(c, o, [](int rank, parallel::ps::PsOptions& mine) {
      if (rank == 2 + 2) mine.killAt = 10;  // worker 2 stops at step 10
    });
    EXPECT_EQ(run.result.steps, 60) << "worker 0 trained to the end";
    for (const auto& st : run.servers)
      EXPECT_NE(std::find(st.deadWorkers.begin(), st.deadWorkers.end(), 2), st.deadWorkers.end());
    EXPECT_EQ(run.servers[0].updates, 60 * 2 + 10);
  }
}

TEST(PsFaults, SyncWithBackupGoesOnWhileEnoughWorkersLive) {
  CpuHog hog;  // every core busy: load must not trip the fault handling
  runtime::TrainConfig c = psConfig("mlp", 3, 16);
  c.maxSteps = 40;
  auto o = psOptions(c, 1, Consistency::Sync);
  o.backupWorkers = 1;
  o.timeoutS = 2;
  auto run = runPs(c, o, [](int rank, parallel::ps::PsOptions& mine) {
    if (rank == 1 + 1) mine.killAt = 5;
  });
  EXPECT_EQ(run.result.steps, 40);
  EXPECT_EQ(run.servers[0].updates, 40);
  EXPECT_EQ(run.servers[0].deadWorkers.at(0), 1);
}

void expectErrorNaming(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PsFaults, SyncWithoutBackupFailsNamingTheDeadWorker) {
  CpuHog hog;  // every core busy: load must not trip the fault handling
  runtime::TrainConfig c = psConfig("mlp", 2, 16);
  auto o = psOptions(c, 1, Consistency::Sync);
  o.timeoutS = 2;
  expectErrorNaming(
      [&] {
        runPs(c, o, [](int rank, parallel::ps::PsOptions& mine) {
          if (rank == 2) mine.killAt = 5;
        });
      },
      "worker 1 (rank 2) sent nothing");
}

TEST(PsFaults, ADeadServerEndsTheJobNamingIt) {
  CpuHog hog;  // every core busy: load must not trip the fault handling
  for (Consistency mode : {Consistency::Sync, Consistency::Async}) {
    runtime::TrainConfig c = psConfig("mlp", 2, 16);
    auto o = psOptions(c, 2, mode);
    o.timeoutS = 1;
    expectErrorNaming(
        [&] {
          runPs(c, o, [](int rank, parallel::ps::PsOptions& mine) {
            if (rank == 1) mine.killAt = 8;
          });
        },
        "parameter server 1 (rank 1) did not");
  }
}

// memory_per_rank lists every rank of the world in rank order: the servers'
// shards (parameters, their gradient and Adam's two slots: about 4P, 4P, 8P
// over all servers) and each worker's full model (4P parameters, no optimizer
// state: the update happens on the servers).
TEST(PsMemory, MemoryPerRankListsServersThenWorkers) {
  const auto r = runDtrain(
      "train --model mlp --dataset synthetic --synthetic-size 256 --epochs 1000 --max-steps 6 "
      "--batch-size 16 --optimizer adam --lr 0.01 --seed 5 --progress off --strategy ps "
      "--servers 2 --workers 2 --consistency async");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto line = nlohmann::json::parse(r.lastLine());
  const auto& ranks = line.at("memory_per_rank");
  ASSERT_EQ(ranks.size(), 4u) << line.dump();
  const auto bytesP = static_cast<double>(line.at("parameters").get<int64_t>()) * 4;
  double serverParams = 0, serverGrads = 0, serverState = 0;
  for (int s = 0; s < 2; ++s) {
    serverParams += ranks[s].at("parameters").get<double>();
    serverGrads += ranks[s].at("gradients").get<double>();
    serverState += ranks[s].at("optimizer_state").get<double>();
    EXPECT_GT(ranks[s].at("parameters").get<double>(), 0.3 * bytesP) << "server " << s;
  }
  EXPECT_NEAR(serverParams / bytesP, 1.0, 0.01);
  EXPECT_NEAR(serverGrads / bytesP, 1.0, 0.01);
  EXPECT_NEAR(serverState / bytesP, 2.0, 0.02);
  for (int w = 2; w < 4; ++w) {
    EXPECT_NEAR(ranks[w].at("parameters").get<double>() / bytesP, 1.0, 0.01) << "rank " << w;
    EXPECT_EQ(ranks[w].at("optimizer_state").get<int64_t>(), 0) << "rank " << w;
    EXPECT_GE(ranks[w].at("peak").get<int64_t>(), ranks[w].at("parameters").get<int64_t>());
  }
}

// --compress on the pushes. Sync with one server and onebit is allreduce with
// onebit in one bucket: the same per-parameter chunks, signs and error
// feedback, only the order of the sum differs. fp16 halves the bytes each
// server receives and stays within fp16's rounding of the fp32 run.
TEST(PsCompress, SyncOneBitWithOneServerIsAllreduceOneBit) {
  runtime::TrainConfig c = psConfig("mlp", 2, 16);
  c.maxSteps = 20;
  parallel::ps::PsOptions o = psOptions(c, 1, Consistency::Sync);
  o.compress.name = "onebit";
  auto ps = runPs(c, o);
  parallel::DataParallelOptions d;
  d.fusionMb = 1000;  // one bucket: top-level chunks as the server's shard
  d.compress.name = "onebit";
  runtime::TrainConfig dpConfig = smallConfig("mlp", 16);
  dpConfig.maxSteps = c.maxSteps;
  auto dp = runDataParallel(dpConfig, 2, d);
  auto plain = runPs(c, psOptions(c, 1, Consistency::Sync));
  expectClose(ps.params, dp[0], 1e-5, "ps onebit vs allreduce onebit");
  double diff = 0;
  for (const auto& [name, v] : plain.params)
    for (size_t i = 0; i < v.size(); ++i) diff += std::abs(v[i] - ps.params.at(name)[i]);
  EXPECT_GT(diff, 1e-3) << "onebit pushes left the parameters as fp32 pushes do";
}

TEST(PsCompress, Fp16HalvesThePushBytesAndStaysClose) {
  runtime::TrainConfig c = psConfig("mlp", 2, 16);
  c.maxSteps = 20;
  auto plain = runPs(c, psOptions(c, 2, Consistency::Sync));
  parallel::ps::PsOptions o = psOptions(c, 2, Consistency::Sync);
  o.compress.name = "fp16";
  auto half = runPs(c, o);
  expectClose(half.params, plain.params, 1e-3, "fp16 pushes");
  for (size_t s = 0; s < 2; ++s) {
    const double ratio = static_cast<double>(half.servers[s].bytesIn) / plain.servers[s].bytesIn;
    EXPECT_NEAR(ratio, 0.5, 0.01) << "server " << s;
    EXPECT_EQ(half.servers[s].bytesOut, plain.servers[s].bytesOut) << "parameters travel as fp32";
  }
}

// --clip-grad-norm under ps. Sync: the servers clip the mean gradient by the
// norm over all their shards, as allreduce clips the averaged gradient. Async:
// each push is one step, clipped by the worker's whole gradient, so one worker
// trains as one process does.
double maxAbsDiff(const Params& a, const Params& b) {
  double d = 0;
  for (const auto& [name, v] : a)
    for (size_t i = 0; i < v.size(); ++i) d = std::max(d, std::abs(static_cast<double>(v[i]) - b.at(name)[i]));
  return d;
}

TEST(PsClip, SyncClipsTheMeanByTheNormOverEveryServer) {
  runtime::TrainConfig c = psConfig("mlp", 2, 16);
  c.maxSteps = 20;
  c.clipGradNorm = 0.05;  // below the mlp's gradient norms: every step clips
  auto ps = runPs(c, psOptions(c, 2, Consistency::Sync));
  runtime::TrainConfig dpConfig = smallConfig("mlp", 16);
  dpConfig.maxSteps = c.maxSteps;
  dpConfig.clipGradNorm = c.clipGradNorm;
  auto dp = runDataParallel(dpConfig, 2);
  expectClose(ps.params, dp[0], 1e-5, "sync ps vs allreduce, clipped");
  dpConfig.clipGradNorm = 0;
  auto unclipped = runDataParallel(dpConfig, 2);
  EXPECT_GT(maxAbsDiff(unclipped[0], dp[0]), 1e-3) << "the clipping did not bind";
}

TEST(PsClip, AsyncWorkerClipsItsOwnGradient) {
  runtime::TrainConfig c = psConfig("mlp", 1, 16);
  c.maxSteps = 20;
  c.clipGradNorm = 0.05;
  auto ps = runPs(c, psOptions(c, 2, Consistency::Async));
  runtime::TrainConfig single = smallConfig("mlp", 16);
  single.maxSteps = c.maxSteps;
  single.clipGradNorm = c.clipGradNorm;
  auto one = runDataParallel(single, 1);
  expectClose(ps.params, one[0], 1e-5, "async ps with one worker vs one process, clipped");
}

}  // namespace
}  // namespace dtrain::test
