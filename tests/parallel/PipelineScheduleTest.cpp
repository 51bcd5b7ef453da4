// The pipeline's pure parts: the per-stage op orders of GPipe, 1F1B and
// interleaved 1F1B (run to completion in a simulation of P stages, whose idle
// time is the schedule's bubble), the balanced cut, the mesh's rank layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "parallel/Mesh.h"
#include "parallel/pipeline/StagePartition.h"
#include "parallel/pipeline/PipelineSchedule.h"

namespace dtrain::parallel::pipeline {
namespace {

std::string str(const std::vector<PipeOp>& ops) {
  std::string s;
  for (auto& op : ops) s += (op.forward ? "F" : "B") + std::to_string(op.micro) + " ";
  return s;
}

TEST(PipelineSchedule, GPipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(str(stageOps(ScheduleKind::GPipe, 0, 2, 3)), "F0 F1 F2 B0 B1 B2 ");
  EXPECT_EQ(str(stageOps(ScheduleKind::GPipe, 1, 2, 3)), "F0 F1 F2 B0 B1 B2 ");
}

TEST(PipelineSchedule, OneFOneBWarmsUpThenAlternates) {
  // Megatron's non-interleaved schedule for P = 4, M = 6.
  EXPECT_EQ(str(stageOps(ScheduleKind::OneFOneB, 0, 4, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  EXPECT_EQ(str(stageOps(ScheduleKind::OneFOneB, 2, 4, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5 ");
  EXPECT_EQ(str(stageOps(ScheduleKind::OneFOneB, 3, 4, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
  // Fewer micro-batches than stages: all forwards, then the backwards.
  EXPECT_EQ(str(stageOps(ScheduleKind::OneFOneB, 0, 4, 2)), "F0 F1 B0 B1 ");
}

TEST(PipelineSchedule, InFlightIsPMinusSForOneFOneBAndMForGPipe) {
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(peakInFlight(stageOps(ScheduleKind::OneFOneB, s, 4, 8)), 4 - s);
    EXPECT_EQ(peakInFlight(stageOps(ScheduleKind::GPipe, s, 4, 8)), 8);
  }
}

TEST(PipelineSchedule, EveryMicroBatchOnceEachWay) {
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int p = 1; p <= 4; ++p)
      for (int s = 0; s < p; ++s)
        for (int m = 1; m <= 9; ++m) {
          std::multiset<int> f, b;
          std::vector<int> order;
          for (auto& op : stageOps(kind, s, p, m)) {
            (op.forward ? f : b).insert(op.micro);
            if (!op.forward) {
              EXPECT_TRUE(f.count(op.micro)) << "backward before forward";
              order.push_back(op.micro);
            }
          }
          EXPECT_EQ(f.size(), static_cast<size_t>(m));
          EXPECT_EQ(std::set<int>(f.begin(), f.end()).size(), static_cast<size_t>(m));
          EXPECT_EQ(f, b);
          EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
        }
}

std::string chunked(const std::vector<PipeOp>& ops) {
  std::string s;
  for (auto& op : ops) s += (op.forward ? "F" : "B") + std::to_string(op.micro) + "." + std::to_string(op.chunk) + " ";
  return s;
}

TEST(PipelineSchedule, InterleavedRunsChunksPStagesAtATime) {
  // Megatron's interleaved schedule, P = 2, v = 2, M = 4 (micro.chunk): stage 0
  // warms up with (P-1-s)*2 + (v-1)*P = 4 forwards, stage 1 with 2.
  EXPECT_EQ(chunked(stageOps(ScheduleKind::OneFOneB, 0, 2, 4, 2)),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 ");
  EXPECT_EQ(chunked(stageOps(ScheduleKind::OneFOneB, 1, 2, 4, 2)),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 ");
  EXPECT_THROW(stageOps(ScheduleKind::OneFOneB, 0, 2, 3, 2), UsageError);  // M not a multiple of P
  EXPECT_THROW(stageOps(ScheduleKind::GPipe, 0, 2, 4, 2), UsageError);
}

// Runs every stage's ops with a forward of chunk time 1/v and a backward of
// 2/v, each starting once its input arrived (messages take no time): the
// activation from model chunk k-1, the gradient from chunk k+1. Returns the
// largest stage idle fraction (idle / makespan); fails on a deadlock.
double simulatedBubble(ScheduleKind kind, int p, int m, int v) {
  std::vector<std::vector<PipeOp>> ops(p);
  for (int s = 0; s < p; ++s) ops[s] = stageOps(kind, s, p, m, v);
  std::map<std::tuple<bool, int, int>, double> done;  // (forward, micro, model chunk) -> finish time
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0), busy(p, 0);
  const int chunks = p * v;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < ops[s].size()) {
        const PipeOp& op = ops[s][next[s]];
        const int k = op.chunk * p + s;
        double ready = clock[s];
        if (op.forward && k > 0) {
          auto it = done.find({true, op.micro, k - 1});
          if (it == done.end()) break;
          ready = std::max(ready, it->second);
        }
        if (!op.forward && k < chunks - 1) {
          auto it = done.find({false, op.micro, k + 1});
          if (it == done.end()) break;
          ready = std::max(ready, it->second);
        }
        if (!op.forward) {
          EXPECT_TRUE(done.count({true, op.micro, k})) << "backward before forward";
        }
        const double t = (op.forward ? 1.0 : 2.0) / v;
        clock[s] = ready + t;
        busy[s] += t;
        done[{op.forward, op.micro, k}] = clock[s];
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) EXPECT_EQ(next[s], ops[s].size()) << "stage " << s << " deadlocked";
  const double makespan = *std::max_element(clock.begin(), clock.end());
  double bubble = 0;
  for (int s = 0; s < p; ++s) bubble = std::max(bubble, 1 - busy[s] / makespan);
  return bubble;
}

TEST(PipelineSchedule, InterleavingDividesTheBubbleByV) {
  // Uniform ops: 1F1B idles (P-1)/(M+P-1) of the step, interleaved (P-1)/(vM+P-1).
  for (int p : {2, 4})
    for (int m : {p, 2 * p, 4 * p}) {
      EXPECT_NEAR(simulatedBubble(ScheduleKind::OneFOneB, p, m, 1), (p - 1.0) / (m + p - 1), 1e-9);
      for (int v : {2, 3}) {
        const double b = simulatedBubble(ScheduleKind::OneFOneB, p, m, v);
        EXPECT_NEAR(b, (p - 1.0) / (v * m + p - 1), 1e-9) << "P " << p << " M " << m << " v " << v;
      }
    }
  EXPECT_NEAR(simulatedBubble(ScheduleKind::GPipe, 4, 8, 1), 3.0 / 11, 1e-9);
}

TEST(PipelineSchedule, InterleavedRunsEveryChunkOnceEachWayInMicroOrder) {
  for (int p = 2; p <= 4; ++p)
    for (int v = 2; v <= 3; ++v)
      for (int m = p; m <= 3 * p; m += p)
        for (int s = 0; s < p; ++s) {
          std::map<int, std::vector<int>> forwards, backwards;  // chunk -> micro-batches in order
          for (auto& op : stageOps(ScheduleKind::OneFOneB, s, p, m, v))
            (op.forward ? forwards : backwards)[op.chunk].push_back(op.micro);
          ASSERT_EQ(forwards.size(), static_cast<size_t>(v));
          for (int c = 0; c < v; ++c) {
            std::vector<int> all(m);
            for (int i = 0; i < m; ++i) all[i] = i;
            EXPECT_EQ(forwards[c], all);
            EXPECT_EQ(backwards[c], all);  // the last backward of each chunk is M-1's
          }
        }
}

TEST(PipelinePartition, BalancedCutsMinimizeTheSlowestStage) {
  EXPECT_EQ(balancedCuts({1, 1, 1, 1}, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(balancedCuts({8, 1, 1, 1, 1, 1}, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(balancedCuts({1, 1, 1, 1, 1, 8}, 2), (std::vector<int>{0, 5}));
  EXPECT_EQ(balancedCuts({3, 3, 2, 2, 2}, 3), (std::vector<int>{0, 1, 3}));  // 3 | 5 | 4
  EXPECT_EQ(balancedCuts({5, 5, 5}, 3), (std::vector<int>{0, 1, 2}));
}

TEST(PipelinePartition, SplitByHandIsChecked) {
  EXPECT_EQ(cutsFromSplit({2, 4}, 6, 3), (std::vector<int>{0, 2, 4}));
  EXPECT_TRUE(cutsFromSplit({}, 6, 3).empty());
  EXPECT_THROW(cutsFromSplit({4, 2}, 6, 3), UsageError);
  EXPECT_THROW(cutsFromSplit({6}, 6, 2), UsageError);
  EXPECT_THROW(cutsFromSplit({}, 2, 3), UsageError);
}

TEST(PipelineMesh, PackKeepsAPipelineOnNeighboursSpreadItsReplicas) {
  // dp 2 x pp 3.
  const MeshShape s{2, 3, 1};
  EXPECT_EQ(meshCoord(4, s, false).replica, 1);
  EXPECT_EQ(meshCoord(4, s, false).stage, 1);
  EXPECT_EQ(meshCoord(4, s, true).replica, 0);
  EXPECT_EQ(meshCoord(4, s, true).stage, 2);
  for (bool spread : {false, true})
    for (int r = 0; r < 6; ++r) EXPECT_EQ(meshRank(meshCoord(r, s, spread), s, spread), r);
}

TEST(PipelineMesh, PackPutsTensorGroupsInnermostSpreadOutermost) {
  // dp 2 x pp 2 x tp 2: pack = ranks 0,1 one group (replica 0, stage 0);
  // spread = ranks 0 and 4 one group.
  const MeshShape s{2, 2, 2};
  const MeshCoord p1 = meshCoord(1, s, false), p2 = meshCoord(2, s, false), p4 = meshCoord(4, s, false);
  EXPECT_EQ(p1.replica, 0);
  EXPECT_EQ(p1.stage, 0);
  EXPECT_EQ(p1.slice, 1);
  EXPECT_EQ(p2.stage, 1);
  EXPECT_EQ(p2.slice, 0);
  EXPECT_EQ(p4.replica, 1);
  const MeshCoord s4 = meshCoord(4, s, true), s1 = meshCoord(1, s, true);
  EXPECT_EQ(s4.slice, 1);
  EXPECT_EQ(s4.replica, 0);
  EXPECT_EQ(s4.stage, 0);
  EXPECT_EQ(s1.replica, 1);
  for (bool spread : {false, true})
    for (int r = 0; r < 8; ++r) EXPECT_EQ(meshRank(meshCoord(r, s, spread), s, spread), r);
}

}  // namespace
}  // namespace dtrain::parallel::pipeline
