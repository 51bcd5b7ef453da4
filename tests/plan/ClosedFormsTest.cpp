// The simulator's pieces against their closed forms: ring allreduce traffic,
// the pipeline bubble of dtrain's own schedules, ZeRO's memory formulas
// (Figure 1 of Rajbhandari et al. 2020 to the printed digit), and the shared
// host link of pack vs spread placement.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/Collectives.h"
#include "plan/Layout.h"
#include "plan/MemoryModel.h"
#include "plan/PipelineSim.h"

using namespace dtrain::plan;

TEST(PlanClosedForms, RingAllreduceSendsTwoNMinusOneOverNBytes) {
  for (int n : {2, 3, 4, 8, 64}) {
    EXPECT_DOUBLE_EQ(ringAllreduceBytesPerRank(n, 1000.0), 2.0 * (n - 1) / n * 1000.0);
    EXPECT_DOUBLE_EQ(reduceScatterBytesPerRank(n, 1000.0), 1.0 * (n - 1) / n * 1000.0);
    const LinkCost link{1e-3, 1e6};
    // 2(n-1) steps of latency, then the bytes at the link's rate.
    EXPECT_NEAR(ringAllreduceTime(n, 1e6, link), 2.0 * (n - 1) * 1e-3 + 2.0 * (n - 1) / n, 1e-12);
  }
  EXPECT_EQ(ringAllreduceTime(1, 1e6, {1e-3, 1e6}), 0);
}

TEST(PlanClosedForms, HierarchicalAllreducePipelinesItsBlocks) {
  const LinkCost shm{0, 1e9}, link{1e-3, 1e6};
  const double block = kHierBlockBytes;
  // 4 blocks, the ring between 2 hosts the slower stage: 4 rings of a block, and
  // one block's staging and copying in shared memory (2 ranks a host) to fill.
  const double cross = ringAllreduceTime(2, block, link), local = 2 * (block / 2) / 1e9;
  EXPECT_NEAR(hierarchicalAllreduceTime(2, 2, 4 * block, shm, link), 4 * cross + local, 1e-12);
  // A partial block: one of each; with 1 rank a host, the ring between hosts alone.
  EXPECT_NEAR(hierarchicalAllreduceTime(4, 2, 1000, shm, link),
              ringAllreduceTime(4, 1000, link) + 2 * 500 / 1e9, 1e-12);
  EXPECT_NEAR(hierarchicalAllreduceTime(4, 1, 3 * block, shm, link), 3 * ringAllreduceTime(4, block, link), 1e-12);
}

TEST(PlanClosedForms, BubbleIsPMinusOneOverMForGpipeAnd1f1b) {
  for (const char* schedule : {"gpipe", "1f1b"})
    for (int p : {2, 4, 8})
      for (int m : {1, 4, 8, 16}) {
        const std::vector<double> f(p, 1.0), b(p, 2.0);
        const double makespan = simulatePipeline(schedule, p, m, 1, f, b, 0, false).makespan;
        const double compute = m * 3.0;
        EXPECT_NEAR((makespan - compute) / compute, (p - 1.0) / m, 1e-9) << schedule << " p " << p << " m " << m;
      }
}

TEST(PlanClosedForms, BusySendersSerializeThePipelinesMessages) {
  // Messages only (no compute), each t: free sends cross the p - 1 links
  // forward and back once, 2 (p - 1) t; a sender busy while its message goes
  // out (machine files' async_sends false) sends its m one after another, so
  // the last micro-batch reaches the last stage at (m + p - 2) t, and back.
  const double t = 0.5;
  for (int p : {2, 3, 4})
    for (int m : {1, 4, 8}) {
      const std::vector<double> zero(p, 0.0);
      EXPECT_NEAR(simulatePipeline("gpipe", p, m, 1, zero, zero, t, false, false).makespan, 2 * (p - 1) * t, 1e-9);
      EXPECT_NEAR(simulatePipeline("gpipe", p, m, 1, zero, zero, t, false, true).makespan, 2 * (m + p - 2) * t, 1e-9)
          << "p " << p << " m " << m;
    }
}

TEST(PlanClosedForms, StagesOnHostsTakeTurnsOnTheirLinks) {
  // GPipe, messages only, each t, every stage on its own host: a host's link
  // out carries one message at a time, so even with free senders the m
  // micro-batches cross each link one after another, 2 (m + p - 2) t (the busy
  // senders' time); on one host (no shared link) 2 (p - 1) t.
  const double t = 0.5;
  for (const char* schedule : {"gpipe"})
    for (int p : {2, 3, 4})
      for (int m : {1, 4, 8}) {
        const std::vector<double> zero(p, 0.0);
        PipelineLinks links;
        links.seconds.assign(p - 1, t);
        for (int s = 0; s < p; ++s) links.host.push_back(s);
        EXPECT_NEAR(simulatePipeline(schedule, p, m, 1, zero, zero, links, false).makespan, 2 * (m + p - 2) * t, 1e-9)
            << schedule << " p " << p << " m " << m;
        links.host.assign(p, 0);
        EXPECT_NEAR(simulatePipeline(schedule, p, m, 1, zero, zero, links, false).makespan, 2 * (p - 1) * t, 1e-9);
      }
}

TEST(PlanClosedForms, AMiddleStagesGradientsAndActivationsShareItsLink) {
  // Three stages on three hosts, compute free: stage 1's link out carries its
  // m activations forward (1 s each) and its m gradients back (2 s each, the
  // wider boundary: mlp's Flatten), after the first activation reached it
  // (2 s), so the step takes at least 2 + 3 m; with links not shared, less.
  const std::vector<double> zero(3, 0.0);
  for (int m : {2, 4, 8}) {
    PipelineLinks shared;
    shared.seconds = {2.0, 1.0};  // chunk 0 -> 1 wider than 1 -> 2 (mlp's Flatten)
    shared.host = {0, 1, 2};
    PipelineLinks apart = shared;
    apart.host.clear();
    const double a = simulatePipeline("1f1b", 3, m, 1, zero, zero, shared, false).makespan;
    const double b = simulatePipeline("1f1b", 3, m, 1, zero, zero, apart, false).makespan;
    EXPECT_GT(a, b) << "m " << m;
    EXPECT_GE(a, 2.0 + 3.0 * m - 1e-9) << "m " << m;
  }
}

TEST(PlanClosedForms, AnIdleEmulatedLinksBucketLetsAMessageThrough) {
  // Two stages on two hosts, compute free, one micro-batch: its activation
  // and its gradient each cross idle links whose full buckets (0.4 s of line
  // rate) let 0.4 s of the 1 s message through at once.
  const std::vector<double> zero(2, 0.0), busy(2, 1.0);
  PipelineLinks links;
  links.seconds = {1.0};
  links.host = {0, 1};
  links.burstSaving = {0.4};
  links.refillS = 0.4;
  EXPECT_NEAR(simulatePipeline("gpipe", 2, 1, 1, zero, zero, links, false).makespan, 2 * 0.6, 1e-9);
  // Two micro-batches back to back: the second finds stage 0's link out just
  // emptied and pays the whole second (0.6, then 1.6); so do the gradients
  // back (from 1.6: 2.2, then 3.2).
  EXPECT_NEAR(simulatePipeline("gpipe", 2, 2, 1, zero, zero, links, false).makespan, 0.6 + 1.0 + 0.6 + 1.0, 1e-9);
  // Forwards of 1 s: the first activation leaves at 1 (arrives 1.6), the
  // second at 2 finds the bucket refilled in the 0.4 s since (arrives 2.6);
  // stage 1 ends its forwards at 3.6, its first gradient crosses full
  // buckets (4.2), the second waits behind it and finds them empty (5.2).
  EXPECT_NEAR(simulatePipeline("gpipe", 2, 2, 1, busy, zero, links, false).makespan, 5.2, 1e-9);
  // A bucket holding more than a message keeps the rest for the next: 0.4 s
  // messages through a 1 s bucket, back to back, all but free until it is spent.
  links.seconds = {0.4};
  links.refillS = 1.0;
  EXPECT_NEAR(simulatePipeline("gpipe", 2, 3, 1, zero, zero, links, false).makespan, 2 * 0.2, 1e-9);
  links.burstSaving.clear();
  links.seconds = {1.0};
  EXPECT_NEAR(simulatePipeline("gpipe", 2, 1, 1, zero, zero, links, false).makespan, 2.0, 1e-9);
}

TEST(PlanClosedForms, TensorParallelSumsTakeTurnsWithTheMessagesOnTheirHostsLink) {
  // GPipe, 2 stages on 2 hosts, 2 micro-batches, no compute, 1 s messages;
  // stage 1's forwards each end in 1 s of tensor-parallel sums across hosts.
  // Stage 0's two activations hold stage 1's link in over [0, 2]: its first
  // sum waits for the second one ([2, 3]), its second follows ([3, 4]); the
  // gradients go back over [4, 5] and [5, 6]. Beside the links (as they were)
  // the sums ran over [1, 2] and [2, 3], and the step ended at 5.
  const std::vector<double> zero(2, 0.0), sums{0.0, 1.0};
  PipelineLinks links;
  links.seconds = {1.0};
  links.host = {0, 1};
  PipelineCores cores;
  cores.forwardCommS = sums;
  cores.backwardCommS = zero;
  EXPECT_NEAR(simulatePipeline("gpipe", 2, 2, 1, sums, zero, links, false, false, cores).makespan, 5.0, 1e-9);
  links.forwardSumS = sums;
  links.backwardSumS = zero;
  links.forwardSumSaving = links.backwardSumSaving = zero;
  EXPECT_NEAR(simulatePipeline("gpipe", 2, 2, 1, sums, zero, links, false, false, cores).makespan, 6.0, 1e-9);
}

namespace {
// GPipe through `stages` stages, forwards of 1 s, free backwards and
// messages, on `cores`: the makespan.
double oneSecondForwards(int stages, int microBatches, const PipelineCores& cores) {
  return simulatePipeline("gpipe", stages, microBatches, 1, std::vector<double>(stages, 1.0),
                          std::vector<double>(stages, 0.0), 0.0, false, false, cores)
      .makespan;
}
}  // namespace

TEST(PlanClosedForms, SharedCoresSlowTheStagesComputingAtOnce) {
  // GPipe, 2 stages, 2 micro-batches, forwards of 1 s, free backwards and
  // messages. Stage 0's second forward starts at 1 with stage 1 idle; stage
  // 1's first starts then too, with stage 0 computing: on one core's worth of
  // ranks it takes 2 s (1 to 3), its second 1 s alone (3 to 4). With a slot
  // per rank nothing slows: 3 s.
  PipelineCores one;
  one.slots = 1;
  EXPECT_NEAR(oneSecondForwards(2, 2, one), 4.0, 1e-9);
  PipelineCores two = one;
  two.slots = 2;
  EXPECT_NEAR(oneSecondForwards(2, 2, two), 3.0, 1e-9);
  // Replicas (dp x tp copies of each stage) compute at the same moments.
  two.copies = 2;
  EXPECT_NEAR(oneSecondForwards(2, 2, two), 4.0, 1e-9);
  // The tensor-parallel sums in an operation's time are not compute.
  one.forwardCommS = {0.5, 0.5};
  EXPECT_NEAR(oneSecondForwards(2, 2, one), 3.5, 1e-9);
}

TEST(PlanClosedForms, WaitingRanksWeighOnTheCoresBesideTheComputingOnes) {
  // GPipe, 2 stages, 2 micro-batches, forwards of 1 s, free backwards and
  // messages, on one slot. A waiting rank of weight 0.5 beside one computing:
  // 1.5 ranks on the slot. Stage 0's first forward, stage 1 waiting: 1.5 s
  // (0 to 1.5); its second starts then, stage 1 not yet computing: 1.5 s;
  // stage 1's first starts beside it: 2 s (1.5 to 3.5); its second beside
  // stage 0 done and waiting: 1.5 s (to 5). With two slots the waiting
  // weight slows nothing (1.5 or 2 ranks on 2).
  PipelineCores one;
  one.slots = 1;
  one.waiting = 0.5;
  EXPECT_NEAR(oneSecondForwards(2, 2, one), 5.0, 1e-9);
  PipelineCores two = one;
  two.slots = 2;
  EXPECT_NEAR(oneSecondForwards(2, 2, two), 3.0, 1e-9);
  // 4 stages on 2 slots, one micro-batch: each forward alone, the 3 waiting
  // ranks 1.5 of weight over 2 slots (1.25) but the runnable ranks kept even
  // over the cores, 2 a core: the computing one shares its core with one
  // waiting, 1 + 0.5 = 1.5 s each, 6 s in all.
  EXPECT_NEAR(oneSecondForwards(4, 1, two), 6.0, 1e-9);
}

TEST(PlanClosedForms, TheWaitingWeightGivesBackTheMeasuredSlowdown) {
  // As many computing ranks as cores, each beside one waiting: a share of
  // 1 + weight, slowed as oversubscribedShare slows it.
  for (double shared : {1.0, 1.2, 1.43})
    for (double measured : {1.05, 1.2, 1.4}) {
      const double w = waitingWeight(measured, shared);
      EXPECT_GT(w, 0);
      EXPECT_NEAR(oversubscribedShare(1 + w, shared), measured, 1e-9) << shared << " " << measured;
    }
  EXPECT_EQ(waitingWeight(1.0, 1.2), 0);  // no slower than alone: the waiting ranks take nothing
  EXPECT_EQ(waitingWeight(3.0, 1.2), 1);  // at most a computing rank's weight
  EXPECT_NEAR(waitingWeight(1.4, 1.0), 0.4, 1e-12);
}

TEST(PlanClosedForms, InterleavingShrinksTheBubbleVFold) {
  for (int p : {2, 4})
    for (int v : {2, 4})
      for (int m : {p, 2 * p, 4 * p}) {
        // One chunk takes 1/v of a stage's time.
        const std::vector<double> f(p, 1.0 / v), b(p, 2.0 / v);
        const double makespan = simulatePipeline("1f1b", p, m, v, f, b, 0, false).makespan;
        const double compute = m * 3.0;
        EXPECT_NEAR((makespan - compute) / compute, (p - 1.0) / (v * m), 1e-9) << "p " << p << " v " << v << " m " << m;
      }
}

TEST(PlanClosedForms, ZeroFigure1MemoryPerDevice) {
  // 7.5B parameters, 64 GPUs, mixed-precision Adam (K = 12): 120, 31.4, 16.6, 1.9 GB.
  const double psi = 7.5e9;
  const double printed[] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage)
    EXPECT_NEAR(zeroPaperBytes(stage, psi, 64) / 1e9, printed[stage], 0.05) << "stage " << stage;
  // The formulas themselves: 16 Psi, 4 Psi + 12 Psi / N, 2 Psi + 14 Psi / N, 16 Psi / N.
  EXPECT_DOUBLE_EQ(zeroPaperBytes(1, 100, 4), 4 * 100 + 12 * 100 / 4.0);
  EXPECT_DOUBLE_EQ(zeroPaperBytes(2, 100, 4), 2 * 100 + 14 * 100 / 4.0);
  EXPECT_DOUBLE_EQ(zeroPaperBytes(3, 100, 4), 16 * 100 / 4.0);
}

TEST(PlanClosedForms, RanksOfAHostShareItsLink) {
  // 4 hosts x 4 ranks, dp 4 x tp 4. pack: a tensor group on one host, each
  // replica group spans the 4 hosts and the host's 4 groups cross its link together.
  Layout l;
  l.dp = 4;
  l.tp = 4;
  l.placement = {4, 4, false};
  const RankGroup packed = meshGroup(l, MeshDim::Replicas);
  EXPECT_EQ(packed.hostsSpanned, 4);
  EXPECT_EQ(packed.concurrentPerHost, 4);
  EXPECT_EQ(meshGroup(l, MeshDim::Tensor).hostsSpanned, 1);
  // spread: the replicas are neighbours, the tensor groups cross hosts.
  l.spread = true;
  EXPECT_EQ(meshGroup(l, MeshDim::Replicas).hostsSpanned, 1);
  EXPECT_EQ(meshGroup(l, MeshDim::Tensor).hostsSpanned, 4);
  Machine m;
  m.links[LinkKind::InterHost] = {1e-4, 1e8};
  m.links[LinkKind::IntraHost] = {1e-6, 1e10};
  const LinkCost shared = groupLink(m, l.placement, packed);
  EXPECT_DOUBLE_EQ(shared.bytesPerS, 1e8 / 4);
}
