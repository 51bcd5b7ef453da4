// The pipeline's pure parts: the per-stage op orders of GPipe and 1F1B, the
// balanced cut, the mesh's rank layout.
#include <gtest/gtest.h>

#include <set>

#include "parallel/Mesh.h"
#include "parallel/pipeline/Partition.h"
#include "parallel/pipeline/Schedule.h"

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
