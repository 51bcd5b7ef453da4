// Liveness of parameter-server jobs (Heartbeat.h), on the local backend, with
// every core kept busy by other threads (CpuHog) so that load cannot trip
// them: a busy worker is never taken for dead, a worker declared dead that
// speaks again is re-admitted under async, ssp and sync with backup workers,
// the server's sends never wait on a worker that does not receive, and eager
// SSP keeps its bound and its reads fresh.
//
// Timing margins: --ps-timeout 1 s here, beats every 0.1 s (a beat takes
// microseconds on an idle machine); where a run must still be going on when
// something happens (a re-admission ~0.1-0.2 s after the declaration), the
// other workers have >= 2 s of sleeps left.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <numeric>

#include "parallel/CpuHog.h"
#include "parallel/PsTestUtil.h"
#include "parallel/ps/Outbox.h"

namespace dtrain::test {
namespace {

using parallel::ps::Consistency;

runtime::TrainConfig psConfig(int workers, int64_t maxSteps) {
  runtime::TrainConfig c = smallConfig("mlp", 16);
  c.workers = workers;
  c.strategy = "ps";
  c.maxSteps = maxSteps;
  return c;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(PsLiveness, ABusyWorkerIsNeverTakenForDead) {
  CpuHog hog;
  // Worker 2 spends 2 s (twice --ps-timeout) on its step without a word to
  // the servers (a long forward pass, a stall): only its heartbeats speak for it.
  runtime::TrainConfig c = psConfig(3, 1);
  c.stragglerMs[2] = 2000;
  for (Consistency mode : {Consistency::Async, Consistency::Sync}) {
    auto o = psOptions(c, 2, mode);
    o.timeoutS = 1;
    auto run = runPs(c, o);
    for (const auto& st : run.servers) {
      EXPECT_TRUE(st.deadWorkers.empty()) << parallel::ps::consistencyName(mode);
      EXPECT_EQ(st.updates, mode == Consistency::Sync ? 1 : 3);
    }
  }
}

struct ReadmitCase {
  Consistency mode;
  int backupWorkers;
};

class Readmission : public ::testing::TestWithParam<ReadmitCase> {};

TEST_P(Readmission, AWorkerDeclaredDeadThatSpeaksAgainRejoins) {
  const ReadmitCase& k = GetParam();
  CpuHog hog;
  runtime::TrainConfig c = psConfig(3, 300);
  // Workers 0 and 2 take >= 3 s: still training when worker 1 comes back.
  c.stragglerMs[0] = 10;
  c.stragglerMs[2] = 10;
  auto o = psOptions(c, 2, k.mode);
  o.backupWorkers = k.backupWorkers;
  o.staleness = k.mode == Consistency::Ssp ? 2 : 0;
  o.timeoutS = 1;
  // Worker 1 falls silent after its push of step 3 (the servers owe it a
  // reply) until both servers have declared it dead.
  auto run = runPs(c, o, [](int rank, parallel::ps::PsOptions& mine) {
    if (rank == 2 + 1) mine.pauseAt = 3;
  });
  // (With backup workers a late worker 0 may be told to stop a few steps early.)
  if (k.mode != Consistency::Sync) {
    EXPECT_EQ(run.result.steps, 300);
  }
  for (const auto& st : run.servers) {
    EXPECT_EQ(st.deadWorkers, std::vector<int>{1}) << "only the silent worker";
    EXPECT_TRUE(contains(st.readmittedWorkers, 1));
    if (k.mode == Consistency::Sync) {
      for (int64_t n : st.appliedPerStep) ASSERT_EQ(n, 3 - k.backupWorkers);
      EXPECT_EQ(st.updates, 300);
    } else {
      EXPECT_EQ(st.updates, 300 * 3) << "the rejoined worker trained to the end too";
    }
  }
  EXPECT_GE(run.workers[1].at("fetches"), 2.0);
}

INSTANTIATE_TEST_SUITE_P(Local, Readmission,
                         ::testing::Values(ReadmitCase{Consistency::Async, 0},
                                           ReadmitCase{Consistency::Ssp, 0},
                                           ReadmitCase{Consistency::Sync, 1}),
                         [](const auto& info) {
                           return std::string(parallel::ps::consistencyName(info.param.mode));
                         });

// The server's outgoing messages never wait for the receiver: a worker that
// does not receive (declared dead, or just stopped) costs a buffer, not time.
TEST(PsOutbox, SendsNeverWaitForAWorkerThatDoesNotReceive) {
  const size_t n = 1 << 18;  // 1 MiB: above the local backend's eager size
  std::atomic<bool> sent{false};
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    if (comm.rank() == 0) {
      parallel::ps::Outbox box;
      auto a = box.buffer(n);
      std::fill(a->begin(), a->end(), 1.0f);
      box.send(comm, a, 1, 1, 11);
      auto b = box.buffer(n);  // a is still in flight: another buffer
      EXPECT_NE(a.get(), b.get());
      std::fill(b->begin(), b->end(), 2.0f);
      box.send(comm, b, 1, 1, 11);
      box.reap();
      EXPECT_EQ(box.pendingTo(1).size(), 2u);
      EXPECT_TRUE(box.pendingTo(0).empty());
      sent = true;
      for (auto& w : box.pendingTo(1)) w->wait();
      box.reap();
      EXPECT_TRUE(box.pendingTo(1).empty());
      const auto* first = a.get();
      a.reset();
      b.reset();
      EXPECT_EQ(box.buffer(n).get(), first) << "a delivered buffer is reused";
      // Withdrawn at the end when never received: no wait either.
      box.send(comm, box.buffer(n), 1, 1, 12);
      box.cancelAll();
      comm.barrier();
      return;
    }
    while (!sent) std::this_thread::yield();
    std::vector<float> got(n);
    for (float want : {1.0f, 2.0f}) {  // in order
      comm.recv(got.data(), n, DType::F32, 0, 11);
      EXPECT_EQ(got.front(), want);
      EXPECT_EQ(got.back(), want);
    }
    comm.barrier();
  });
}

double fractionAtMost(const std::vector<int64_t>& hist, size_t k) {
  const double all = std::accumulate(hist.begin(), hist.end(), 0.0);
  double within = 0;
  for (size_t i = 0; i <= k && i < hist.size(); ++i) within += hist[i];
  return within / all;
}

size_t largestBucket(const std::vector<int64_t>& hist) {
  size_t k = 0;
  for (size_t i = 0; i < hist.size(); ++i)
    if (hist[i] > 0) k = i;
  return k;
}

// Eager SSP (ESSP): fetch every step, block only past the bound. No worker
// runs more than s steps ahead of the slowest; a gradient is applied at most
// (W-1)(2s+1) updates after the parameters it was computed on (its fetch for
// step t waited until every worker had completed t-s, and no other worker can
// push past step t+s before it pushes t: 2s+1 pushes each); and, without
// stragglers, mostly within W (about one update per other worker and step).
TEST(EagerSsp, KeepsTheBoundAndFreshReads) {
  const int W = 3;
  const int64_t s = 2;
  for (bool straggler : {false, true}) {
    runtime::TrainConfig c = psConfig(W, 60);
    if (straggler) c.stragglerMs[2] = 10;
    auto o = psOptions(c, 1, Consistency::Ssp);
    o.staleness = s;
    auto run = runPs(c, o);
    const auto& st = run.servers[0];
    EXPECT_EQ(st.updates, 60 * W);
    EXPECT_LE(st.sspMaxAhead, s) << "straggler " << straggler;
    EXPECT_LE(largestBucket(st.staleness), static_cast<size_t>((W - 1) * (2 * s + 1)))
        << "straggler " << straggler;
    const double fresh = fractionAtMost(st.staleness, W);
    std::cout << "straggler " << straggler << ": staleness <= W for " << fresh
              << " of the pushes, largest " << largestBucket(st.staleness) << "\n";
    if (!straggler) {
      EXPECT_GE(fresh, 0.5);
    }
    for (const auto& w : run.workers) {
      EXPECT_GE(w.at("fetches"), 60.0) << "eager: a fetch every step";
      EXPECT_LE(w.at("read_staleness_max"), s);
    }
  }
}

// Lazy reads keep cached parameters while they are within the bound: fewer
// fetches, staler gradients (what eager reads fix).
TEST(EagerSsp, LazyReadsFetchLessAndReadStaler) {
  runtime::TrainConfig c = psConfig(3, 60);
  double mean[2];
  for (bool eager : {true, false}) {
    auto o = psOptions(c, 1, Consistency::Ssp);
    o.staleness = 4;
    o.sspEagerReads = eager;
    auto run = runPs(c, o);
    const auto& h = run.servers[0].staleness;
    double sum = 0, count = 0;
    for (size_t k = 0; k < h.size(); ++k) {
      sum += static_cast<double>(k) * h[k];
      count += h[k];
    }
    mean[eager] = sum / count;
    if (!eager) {
      EXPECT_LT(run.workers[0].at("fetches"), 60.0);
    }
  }
  EXPECT_LT(mean[1], mean[0]) << "eager mean staleness " << mean[1] << ", lazy " << mean[0];
}

}  // namespace
}  // namespace dtrain::test
