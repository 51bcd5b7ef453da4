// The simulator end to end on small configurations: a machine file's measured
// model times replace the FLOP count; pack beats spread when the tensor-parallel
// sums would otherwise cross a slow host link; the predicted timeline is a
// Chrome trace with the measured timeline's names.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "api/StrategyRegistry.h"
#include "api/Train.h"
#include "core/Error.h"
#include "cli/CliRunner.h"
#include "plan/Collectives.h"
#include "plan/MemoryModel.h"
#include "plan/PredictionOutput.h"
#include "plan/Simulator.h"

using namespace dtrain;

namespace {

const char* kCluster = R"({"format": "dtrain-machine-1", "devices_per_host": 2,
  "memory_per_device_bytes": 4e9, "compute": {"flops_per_s": {"fp32": 1e10}, "memory_bytes_per_s": 1e10},
  "links": {"intra_host": {"alpha_s": 1e-5, "bytes_per_s": 1e9}, "inter_host": {"alpha_s": 2e-4, "bytes_per_s": 1.25e7}}})";

api::RunConfig gptTiny(int64_t batch) {
  api::RunConfig rc;
  rc.train.model = "gpt-tiny";
  rc.train.batchSize = batch;
  rc.train.optimizer = "adam";
  return api::prepared(rc, api::sourcesFromValues(rc));
}

// `text` with gpt-tiny calibrated at micro-batch 4 (0.3 s a step).
std::string withGptTinyProfile(std::string text) {
  return text.insert(text.rfind('}'), R"(, "models": {"gpt-tiny": {"micro_batches": {
      "4": {"forward_s": 0.1, "backward_s": 0.2, "update_s": 0.003}}}})");
}

// 4 emulated hosts of 1 device each on one machine of 2 cores, gpt-tiny calibrated.
std::string emulatedHosts() {
  std::string text = kCluster;
  text.replace(text.find("\"devices_per_host\": 2"), 21, "\"devices_per_host\": 1");
  text.insert(text.rfind('}'), R"(, "shared_cores": 2)");
  return withGptTinyProfile(text);
}

// `text` with `entry` (`, "key": value`) added to its inter_host link.
std::string withInterHost(std::string text, const std::string& entry) {
  return text.insert(text.find("\"bytes_per_s\": 1.25e7") + 21, entry);
}

// gpt-tiny on the mpi backend: `workers` ranks, tensor parallelism `tp`, `stages` pipeline stages.
api::RunConfig mpiRun(int workers, int tp, int stages, bool overlap = true) {
  api::RunConfig rc;
  rc.train.model = "gpt-tiny";
  rc.train.backend = "mpi";
  rc.train.workers = workers;
  rc.train.tensorParallel = tp;
  rc.train.pipelineStages = stages;
  rc.train.microBatches = stages;
  rc.train.batchSize = 4 * stages;
  rc.train.overlap = overlap;
  rc.train.optimizer = "adam";
  return api::prepared(rc, api::sourcesFromValues(rc));
}

}  // namespace

TEST(PlanSimulator, CalibratedModelTimesReplaceTheFlopCount) {
  std::string text = kCluster;
  text.insert(text.rfind('}'), R"(, "models": {"gpt-tiny": {"micro_batches": {
      "4": {"forward_s": 0.01, "backward_s": 0.02, "update_s": 0.003}}}})");
  const plan::Machine m = plan::parseMachine(text, "calibrated");
  const plan::Prediction at4 = plan::simulate(gptTiny(4), m);
  EXPECT_NEAR(at4.computeS, 0.03, 1e-9);
  EXPECT_NEAR(at4.optimizerS, 0.003, 1e-9);
  // Another micro-batch size: the nearest measured one, scaled linearly.
  EXPECT_NEAR(plan::simulate(gptTiny(8), m).computeS, 0.06, 1e-9);
  // Without the entry: FLOPs at the machine's rate (forward + 2x backward).
  const plan::Prediction flops = plan::simulate(gptTiny(4), plan::parseMachine(kCluster, "plain"));
  EXPECT_GT(flops.computeS, 0);
  EXPECT_NE(flops.computeS, 0.03);
}

TEST(PlanSimulator, PackKeepsTensorParallelSumsOnTheHost) {
  // dp 2 x tp 2 on 2 hosts of 2 ranks: pack keeps each tensor-parallel group
  // on one host; spread sends its sums (6 per block) over the slow link.
  api::RunConfig rc;
  rc.train.model = "gpt-tiny";
  rc.train.backend = "mpi";
  rc.train.workers = 4;
  rc.train.tensorParallel = 2;
  rc.train.batchSize = 8;
  const plan::Machine m = plan::parseMachine(kCluster, "cluster");
  plan::SimulateOptions o;
  o.hosts = 2;
  rc.train.placement = "pack";
  const plan::Prediction pack = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  rc.train.placement = "spread";
  const plan::Prediction spread = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  EXPECT_GT(pack.samplesPerS, spread.samplesPerS);
  // pack's replicas cross the link instead: one gradient allreduce per step.
  EXPECT_EQ(pack.dominant.rfind("tensor-parallel sums", 0), std::string::npos) << pack.dominant;
  EXPECT_EQ(spread.dominant.rfind("tensor-parallel sums", 0), 0u) << spread.dominant;
}

TEST(PlanSimulator, TimelineHasTheMeasuredNames) {
  const std::string dir = test::tempDir();
  std::ofstream(dir + "/m.json") << kCluster;
  std::ofstream(dir + "/run.toml") << "[model]\nname = \"gpt-tiny\"\n[training]\nbatch_size = 4\n"
                                      "[parallel]\nworkers = 4\npipeline_stages = 2\nmicro_batches = 2\n";
  const auto r = test::runDtrain("simulate --config " + dir + "/run.toml --machine " + dir + "/m.json --timeline " +
                                 dir + "/t.json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto line = nlohmann::json::parse(r.lastLine());
  EXPECT_NEAR(line.at("step_s").get<double>(),
              line.at("compute_s").get<double>() + line.at("bubble_s").get<double>() +
                  line.at("exposed_comm_s").get<double>() + line.at("optimizer_s").get<double>(),
              1e-12);
  // The terms, the exposed communication's parts apart, add up to the step.
  double terms = 0;
  for (const auto& [name, seconds] : line.at("terms_s").items()) terms += seconds.get<double>();
  EXPECT_NEAR(terms, line.at("step_s").get<double>(), 1e-12);
  EXPECT_GT(line.at("terms_s").at("pipeline bubble").get<double>(), 0);
  EXPECT_EQ(line.at("memory_per_rank").size(), 4u);
  std::ifstream in(dir + "/t.json");
  const auto trace = nlohmann::json::parse(in);
  std::set<std::string> names;
  for (const auto& e : trace.at("traceEvents")) names.insert(e.at("name").get<std::string>());
  for (const char* n : {"F0", "F1", "B0", "B1", "allreduce", "optimizer"}) EXPECT_TRUE(names.count(n)) << n;
}

TEST(PlanSimulator, CalibrateLayerNamesAndSharedHostFitsAreUsed) {
  // calibrate's per-layer names are the model's layer sequence: mlp's
  // 0 (Flatten), 1 (Linear), 2 (ReLU), ...; their times add up.
  std::string text = kCluster;
  std::string layers;
  for (int i = 0; i < 6; ++i)
    layers += std::string(i ? "," : "") + R"({"name": ")" + std::to_string(i) +
              R"(", "params": 0, "forward_s": 0.001, "backward_s": 0.002, "activation_bytes": 0})";
  text.insert(text.rfind('}'), R"(, "models": {"mlp": {"optimizer": "sgd", "params": 269322, "micro_batches": {
      "16": {"forward_s": 1, "backward_s": 1, "update_s": 0.5, "layers": [)" + layers + "]}}}}");
  text.insert(text.rfind('}'), R"(, "collectives": {"inter_host_shared": {"allreduce_hier":
      {"ranks": 4, "ranks_per_host": 2, "alpha_s": 0.5, "bytes_per_s": 1e12}}})");
  const plan::Machine m = plan::parseMachine(text, "calibrated");
  api::RunConfig rc;
  rc.train.model = "mlp";
  rc.train.dataset = "synthetic";
  rc.train.batchSize = 16;
  const plan::Prediction one = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m);
  EXPECT_NEAR(one.computeS, 6 * 0.003, 1e-9);  // the six layers, not the whole-model times
  EXPECT_NEAR(one.optimizerS, 0.5, 1e-9);      // sgd: measured with it
  rc.train.optimizer = "adam";
  EXPECT_LT(plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m).optimizerS, 0.5);
  // 2 hosts x 2 ranks, hierarchical allreduce: the fit measured at that shape,
  // once per fusion bucket as the trainer cuts them at 0.25 MiB, whole tensors
  // each: the last two Linears' 68,362 elements, then the first's 200,960
  // (2 buckets, where 1,077,288 bytes in pieces of 0.25 MiB would be 5).
  rc.train.optimizer = "sgd";
  rc.train.backend = "mpi";
  rc.train.workers = 4;
  rc.train.allreduceAlgo = "hier";
  plan::SimulateOptions o;
  o.hosts = 2;
  const plan::Prediction four = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  // Plus the step-end checks (8 bytes over the 4 ranks: every step, and every 100th the loss).
  plan::Placement packed;
  packed.threads = false;
  packed.hosts = 2;
  packed.ranksPerHost = 2;
  const double checks = 1.01 * plan::allreduceTime(m, packed, plan::RankGroup{4, 2, 2, 1}, 8, "auto");
  EXPECT_NEAR(four.commS - checks, 2 * 0.5 + 4.0 * 269322 / 1e12, 1e-6);
  // At 0.01 MiB (10,486 bytes): the last Linear and the middle one's bias
  // (11,304 bytes), the middle weight, the first Linear: 3.
  rc.train.fusionMb = 0.01;
  const plan::Prediction small = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  EXPECT_NEAR(small.commS - checks, 3 * 0.5 + 4.0 * 269322 / 1e12, 1e-6);
}

TEST(PlanSimulator, ZeroThreeSendsTheModelsUnitsWhateverTheFusionSize) {
  // ZeRO 3 reduce-scatters and gathers each of the model's units
  // (parallel/zero/ZeroStage3.cpp), not --fusion-mb's buckets: gpt-tiny's
  // head, its two blocks and its embedding, last first. With collectives of
  // 0.5 s each the sync counts them.
  std::string text = emulatedHosts();
  text.insert(text.rfind('}'), R"(, "collectives": {"inter_host": {
      "reduce_scatter_ring": {"ranks": 4, "ranks_per_host": 1, "alpha_s": 0.5, "bytes_per_s": 1e15},
      "allgather_ring": {"ranks": 4, "ranks_per_host": 1, "alpha_s": 0.5, "bytes_per_s": 1e15}}})");
  const plan::Machine m = plan::parseMachine(text, "calibrated");
  api::RunConfig rc = mpiRun(4, 1, 1);
  rc.train.zero = 3;
  std::vector<double> syncS;
  for (double mb : {0.001, 25.0}) {
    rc.train.fusionMb = mb;
    const api::RunConfig run = api::prepared(rc, api::sourcesFromValues(rc));
    const plan::Prediction r = plan::simulate(run, m, plan::SimulateOptions{4});
    const plan::AnalyticModel p = plan::profileFor(run);
    const std::vector<double> units = plan::fusionBuckets(run.train, r.layout, p, 0, static_cast<double>(p.params()));
    ASSERT_EQ(units.size(), p.layers.size()) << mb;
    for (size_t u = 0; u < units.size(); ++u)
      EXPECT_DOUBLE_EQ(units[u], 4.0 * static_cast<double>(p.layers[p.layers.size() - 1 - u].params())) << mb;
    for (const auto& [name, seconds] : r.terms)
      if (name == "gradient sync") syncS.push_back(seconds);
  }
  ASSERT_EQ(syncS.size(), 2u);
  EXPECT_DOUBLE_EQ(syncS[0], syncS[1]);
  // Each unit's reduce-scatter and gather, and backward's gathers again of
  // all but the units forward ended with (the head, the last block and the
  // tied embedding): the first block's.
  EXPECT_NEAR(syncS[0], 4 * 2 * 0.5 + 0.5, 1e-6);
}

TEST(PlanSimulator, StagesAreCutAsTheTrainerCutsThem) {
  // --pipeline-split by hand: embedding and both blocks on stage 0, the head
  // (with its own copy of the tied embedding) on stage 1.
  api::RunConfig rc;
  rc.train.model = "gpt-tiny";
  rc.train.workers = 2;
  rc.train.pipelineStages = 2;
  rc.train.microBatches = 2;
  rc.train.batchSize = 4;
  rc.train.pipelineSplit = {3};
  const plan::Machine m = plan::parseMachine(kCluster, "cluster");
  const plan::Prediction split = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m);
  ASSERT_EQ(split.memory.size(), 2u);
  EXPECT_DOUBLE_EQ(split.memory[0].parameters, 4.0 * (256 * 64 + 64 * 64 + 2 * (12 * 64 * 64 + 13 * 64)));
  EXPECT_DOUBLE_EQ(split.memory[1].parameters, 4.0 * (2 * 64 + 256 * 64));
  // Balanced: the two blocks (nearly all the time) on different stages.
  rc.train.pipelineSplit.clear();
  const plan::Prediction balanced = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m);
  EXPECT_EQ(balanced.layout.stageLayers[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(balanced.layout.stageLayers[1], (std::vector<int>{2, 3}));
  EXPECT_LT(balanced.stepS, split.stepS);
}

TEST(PlanSimulator, SharedCoresSlowEveryRankOfTheEmulatedHosts) {
  // 4 hosts of 1 device each, but all on one machine of 2 cores: 4 ranks of
  // mpi data parallelism compute at half the calibrated rate, 2 ranks at full.
  std::string text = kCluster;
  text.insert(text.rfind('}'), R"(, "models": {"gpt-tiny": {"micro_batches": {
      "4": {"forward_s": 0.01, "backward_s": 0.02, "update_s": 0.003}}}})");
  auto ranks = [](int n) {
    api::RunConfig rc;
    rc.train.model = "gpt-tiny";
    rc.train.backend = "mpi";
    rc.train.workers = n;
    rc.train.batchSize = 4;
    rc.train.optimizer = "adam";
    return api::prepared(rc, api::sourcesFromValues(rc));
  };
  plan::SimulateOptions o;
  o.hosts = 4;
  std::string own = text;
  own.replace(own.find("\"devices_per_host\": 2"), 21, "\"devices_per_host\": 1");
  std::string shared = own;
  shared.insert(shared.rfind('}'), R"(, "shared_cores": 2)");
  const plan::Machine hostsOwn = plan::parseMachine(own, "own"), hostsShare = plan::parseMachine(shared, "shared");
  EXPECT_EQ(hostsShare.sharedCores, 2);
  EXPECT_NEAR(plan::simulate(ranks(4), hostsOwn, o).computeS, 0.03, 1e-9);
  EXPECT_NEAR(plan::simulate(ranks(4), hostsShare, o).computeS, 0.03 * 4 / 2, 1e-9);
  EXPECT_NEAR(plan::simulate(ranks(4), hostsShare, o).optimizerS,
              plan::simulate(ranks(4), hostsOwn, o).optimizerS * 2, 1e-9);
  EXPECT_NEAR(plan::simulate(ranks(2), hostsShare, o).computeS, 0.03, 1e-9);  // max(1, 2 / 2)
  EXPECT_NEAR(plan::simulate(ranks(8), hostsShare, o).computeS, 0.03 * 8 / 2, 1e-9);
  // The model's measured slowdown beyond its share (calibrate's shared_slowdown):
  // in full from 2 ranks a core, in proportion from 1 to 2, none where the ranks fit.
  std::string slowed = shared;
  slowed.replace(slowed.find("\"gpt-tiny\": {"), 13, R"("gpt-tiny": {"shared_slowdown": 1.2, )");
  const plan::Machine hostsSlowed = plan::parseMachine(slowed, "slowed");
  EXPECT_DOUBLE_EQ(hostsSlowed.models.at("gpt-tiny").sharedSlowdown, 1.2);
  EXPECT_NEAR(plan::simulate(ranks(2), hostsSlowed, o).computeS, 0.03, 1e-9);
  EXPECT_NEAR(plan::simulate(ranks(3), hostsSlowed, o).computeS, 0.03 * 1.5 * 1.1, 1e-9);
  EXPECT_NEAR(plan::simulate(ranks(4), hostsSlowed, o).computeS, 0.03 * 2 * 1.2, 1e-9);
  EXPECT_NEAR(plan::simulate(ranks(8), hostsSlowed, o).computeS, 0.03 * 4 * 1.2, 1e-9);
  // A typo'd value is refused.
  std::string zero = own;
  zero.insert(zero.rfind('}'), R"(, "shared_cores": 0)");
  EXPECT_THROW(plan::parseMachine(zero, "zero"), UsageError);
  std::string sends = own;
  sends.insert(sends.rfind('}'), R"(, "async_sends": false)");
  EXPECT_FALSE(plan::parseMachine(sends, "sends").asyncSends);
  EXPECT_TRUE(hostsOwn.asyncSends);
  sends.replace(sends.find("false"), 5, "\"no\"");
  EXPECT_THROW(plan::parseMachine(sends, "bad sends"), UsageError);
}

namespace {

// The emulated hosts with calibrate's paired waits: 1 ms at 2 ranks a core, 3 at 4.
plan::Machine withPairedWaits() {
  std::string text = emulatedHosts();
  text.insert(text.rfind('}'), R"(, "paired_sum_waits": [{"ranks_per_core": 2, "seconds": 0.001},
      {"ranks_per_core": 4, "seconds": 0.003}])");
  return plan::parseMachine(text, "waits");
}

}  // namespace

TEST(PlanSimulator, PackedPairsOnFullCoresWaitForTheirPartnersCore) {
  // dp x tp 2 packed on emulated hosts sharing 2 cores: every tensor-parallel
  // sum within a host adds calibrate's paired wait at the run's ranks a core
  // (8 ranks: 4 a core, 4 ranks: 2); spread, whose sums cross the hosts, adds none.
  const plan::Machine plain = plan::parseMachine(emulatedHosts(), "plain");
  const plan::Machine waits = withPairedWaits();
  auto sums = [](int workers, const std::string& placement, const plan::Machine& m, int hosts) {
    api::RunConfig rc = mpiRun(workers, 2, 1);
    rc.train.placement = placement;
    rc = api::prepared(rc, api::sourcesFromValues(rc));
    plan::SimulateOptions o;
    o.hosts = hosts;
    const plan::Prediction p = plan::simulate(rc, m, o);
    for (const auto& [name, seconds] : p.terms)
      if (name == "tensor-parallel sums") return seconds;
    return -1.0;
  };
  // The sums a micro-batch: each block's forward and backward ones.
  int count = 0;
  for (const plan::AnalyticLayer& layer : plan::profileFor(mpiRun(8, 2, 1)).layers)
    count += layer.tensorParallelSums +
             (layer.tensorParallelBackwardSums >= 0 ? layer.tensorParallelBackwardSums : layer.tensorParallelSums);
  ASSERT_GT(count, 0);
  EXPECT_NEAR(sums(8, "pack", waits, 4) - sums(8, "pack", plain, 4), count * 0.003, 1e-9);
  EXPECT_NEAR(sums(4, "pack", waits, 2) - sums(4, "pack", plain, 2), count * 0.001, 1e-9);
  EXPECT_GT(sums(8, "spread", plain, 4), 0);
  EXPECT_DOUBLE_EQ(sums(8, "spread", waits, 4), sums(8, "spread", plain, 4));
}

TEST(PlanSimulator, PipelineStagesMeetAtTheStepEndSumsAfterAPairedWait) {
  // 4 emulated hosts of 1 rank on 2 shared cores (2 ranks a core): a
  // pipeline's step-end checks add the paired wait at 2 a core once; data
  // parallelism's ranks meet at the gradient sum before them: no wait.
  const plan::Machine plain = plan::parseMachine(emulatedHosts(), "plain");
  const plan::Machine waits = withPairedWaits();
  plan::SimulateOptions o;
  o.hosts = 4;
  auto checks = [&](int stages, const plan::Machine& m) {
    for (const auto& [name, seconds] : plan::simulate(mpiRun(4, 1, stages, true), m, o).terms)
      if (name == "step-end checks") return seconds;
    return -1.0;
  };
  EXPECT_GT(checks(4, plain), 0);
  EXPECT_NEAR(checks(4, waits) - checks(4, plain), 0.001, 1e-12);
  EXPECT_NEAR(checks(2, waits) - checks(2, plain), 0.001, 1e-12);
  EXPECT_GT(checks(1, plain), 0);
  EXPECT_DOUBLE_EQ(checks(1, waits), checks(1, plain));
}

TEST(PlanSimulator, TheNetworksCoreTimeSlowsTheComputeBesideItsTraffic) {
  // 4 emulated hosts of 1 rank on 2 shared cores, their link's kernel work
  // 1e-8 core s a byte. Data parallelism sends its ring allreduce's bytes
  // during backward (with overlap): the 4 ranks' bytes cost c x bytes core
  // seconds, taken from the 2 cores' compute.
  const std::string text = emulatedHosts(), charged = withInterHost(text, R"(, "core_s_per_byte": 1e-8)");
  const plan::Machine free = plan::parseMachine(text, "free"), costly = plan::parseMachine(charged, "costly");
  EXPECT_EQ(costly.link(plan::LinkKind::InterHost).coreSPerByte, 1e-8);
  auto run = [](int workers, int stages, bool overlap) { return mpiRun(workers, 1, stages, overlap); };
  plan::SimulateOptions o;
  o.hosts = 4;
  const plan::Prediction dpFree = plan::simulate(run(4, 1, true), free, o);
  const plan::Prediction dp = plan::simulate(run(4, 1, true), costly, o);
  EXPECT_NEAR(dp.stepS - dpFree.stepS, 1e-8 * dp.bytesPerRank * 4 / 2, 1e-9);
  EXPECT_NEAR(dp.exposedCommS - dpFree.exposedCommS, dp.stepS - dpFree.stepS, 1e-12);
  // Without overlap the buckets go after backward: nothing computes beside them.
  EXPECT_NEAR(plan::simulate(run(4, 1, false), costly, o).stepS, plan::simulate(run(4, 1, false), free, o).stepS,
              1e-12);
  // 2 ranks on 2 cores keep them busy too.
  const plan::Prediction two = plan::simulate(run(2, 1, true), costly, o);
  EXPECT_GT(two.stepS, plan::simulate(run(2, 1, true), free, o).stepS);
  // A pipeline's messages go while the other stages compute: charged at most
  // in full, and only the part of the step the stages keep the cores busy.
  const plan::Prediction pipeFree = plan::simulate(run(4, 4, true), free, o);
  const plan::Prediction pipe = plan::simulate(run(4, 4, true), costly, o);
  EXPECT_GT(pipe.stepS, pipeFree.stepS);
  EXPECT_LE(pipe.stepS - pipeFree.stepS, 1e-8 * pipe.bytesPerRank * 4 / 2 + 1e-12);
  // A negative cost is a typo.
  std::string negative = charged;
  negative.replace(negative.find("1e-8"), 4, "-1e-8");
  EXPECT_THROW(plan::parseMachine(negative, "negative"), UsageError);
}

TEST(PlanSimulator, ABucketRefilledByComputeSpeedsASumOnlyWhereTheRanksFitTheCores) {
  // Emulated hosts on 2 shared cores whose links hold a 64 KB token bucket:
  // 2 tensor-parallel ranks (fitting the cores) reach a sum together and the
  // refilled bucket takes its burst off; 4 ranks reach it a core slice apart
  // and the sum takes its calibrated time, bucket or not.
  const std::string text = emulatedHosts();
  const plan::Machine none = plan::parseMachine(text, "none");
  const plan::Machine burst = plan::parseMachine(withInterHost(text, R"(, "burst_bytes": 65536)"), "burst");
  auto tp = [](int n) { return mpiRun(n, n, 1); };
  plan::SimulateOptions o;
  o.hosts = 4;
  EXPECT_LT(plan::simulate(tp(2), burst, o).stepS, plan::simulate(tp(2), none, o).stepS - 1e-4);
  EXPECT_NEAR(plan::simulate(tp(4), burst, o).stepS, plan::simulate(tp(4), none, o).stepS, 1e-12);
}

TEST(PlanSimulator, AFullBucketTakesItsBurstOffTheGradientSyncAfterTheCompute) {
  // The links idle through the step's compute (no bucket leaves during
  // backward: 4 or 2 ranks keep the 2 shared cores computing, or --overlap
  // off), so the sync's first call finds the 64 KB bucket full: its bytes'
  // first 64 KB take no link time. Buckets sent beside backward (overlap on
  // hosts with cores of their own; ZeRO's reduce-scatters) find it spent.
  plan::SimulateOptions o;
  o.hosts = 4;
  // The step time the bucket saves on the machine `text` describes.
  auto saved = [&](const std::string& text, const api::RunConfig& rc) {
    const plan::Machine none = plan::parseMachine(text, "none");
    const plan::Machine burst = plan::parseMachine(withInterHost(text, R"(, "burst_bytes": 65536)"), "burst");
    return plan::simulate(rc, none, o).stepS - plan::simulate(rc, burst, o).stepS;
  };
  const std::string shared = emulatedHosts(), own = withGptTinyProfile(kCluster);
  EXPECT_NEAR(saved(shared, mpiRun(4, 1, 1)), 65536 / 1.25e7, 1e-9);
  EXPECT_NEAR(saved(shared, mpiRun(2, 1, 1)), 65536 / 1.25e7, 1e-9);
  api::RunConfig zero = mpiRun(4, 1, 1);
  zero.train.zero = 1;
  EXPECT_NEAR(saved(shared, api::prepared(zero, api::sourcesFromValues(zero))), 0, 1e-12);
  EXPECT_NEAR(saved(own, mpiRun(4, 1, 1, true)), 0, 1e-12);
  EXPECT_NEAR(saved(own, mpiRun(4, 1, 1, false)), 65536 / 1.25e7, 1e-9);
}

TEST(PlanSimulator, TrainWithAMachineFileReportsItsOwnPrediction) {
  // dtrain train --machine: the result line carries what dtrain simulate
  // predicts for the same configuration.
  const std::string dir = test::tempDir();
  std::ofstream(dir + "/m.json") << kCluster;
  std::ofstream(dir + "/run.toml") << "[model]\nname = \"mlp\"\n[data]\nname = \"synthetic\"\nsynthetic_size = 256\n"
                                      "[training]\nbatch_size = 16\nmax_steps = 2\n[parallel]\nworkers = 2\n"
                                      "[logging]\nprogress = \"off\"\n";
  const auto sim = test::runDtrain("simulate --config " + dir + "/run.toml --machine " + dir + "/m.json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  const auto predicted = nlohmann::json::parse(sim.lastLine());
  const auto t = test::runDtrain("train --config " + dir + "/run.toml --machine " + dir + "/m.json");
  ASSERT_EQ(t.code, 0) << t.err;
  const auto line = nlohmann::json::parse(t.lastLine());
  EXPECT_DOUBLE_EQ(line.at("predicted_step_s").get<double>(), predicted.at("step_s").get<double>());
  EXPECT_DOUBLE_EQ(line.at("predicted_samples_per_s").get<double>(), predicted.at("samples_per_s").get<double>());
  EXPECT_GT(line.at("samples_per_s").get<double>(), 0);
  // Without --machine: no prediction; a bad file is refused before training.
  const auto plain = test::runDtrain("train --config " + dir + "/run.toml");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.lastLine()).contains("predicted_step_s"));
  std::ofstream(dir + "/bad.json") << R"({"format": "dtrain-machine-1", "devices_per_host": 0})";
  test::expectError(test::runDtrain("train --config " + dir + "/run.toml --machine " + dir + "/bad.json"), 2,
                    "bad.json");
  // A strategy the simulator has no model of is refused, not predicted as another.
  test::expectError(test::runDtrain("train --dataset synthetic --synthetic-size 256 --strategy fedavg --clients 4 "
                                    "--rounds 1 --progress off --machine " + dir + "/m.json"),
                    2, "the simulator has no model of --strategy fedavg");
}

// --sfb: the wide mlp's two large weights travel as factors (a ring allgather:
// (W-1) B (M+N) floats per rank and layer), the rest in the ring allreduce
// (2 (W-1)/W of it): the trainer's bytes (docs/PERFORMANCE.md, within 1%).
TEST(PlanSimulator, SufficientFactorsSendTheFactorsOfTheLayersThatPay) {
  auto wideMlp = [](const std::string& sfb, int64_t batch) {
    api::RunConfig rc;
    rc.train.model = "mlp";
    rc.train.mlpHidden = {2048, 2048};
    rc.train.backend = "mpi";
    rc.train.workers = 4;
    rc.train.batchSize = batch;
    rc.train.sfb = sfb;
    return api::prepared(rc, api::sourcesFromValues(rc));
  };
  const plan::Machine m = plan::parseMachine(kCluster, "cluster");
  plan::SimulateOptions o;
  o.hosts = 2;
  const double w = 4, b = 16;
  const double factors = 4 * (w - 1) * b * ((784 + 2048) + (2048 + 2048));
  const double rest = 4 * (10 * 2048 + 2048 + 2048 + 10);
  const double all = 4 * (784 * 2048 + 2048 * 2048 + 10 * 2048 + 2048 + 2048 + 10);
  const plan::Prediction off = plan::simulate(wideMlp("off", 16), m, o);
  const plan::Prediction sfb = plan::simulate(wideMlp("auto", 16), m, o);
  EXPECT_NEAR(off.bytesPerRank, 2 * (w - 1) / w * all, 1e-6 * all);
  EXPECT_NEAR(sfb.bytesPerRank, factors + 2 * (w - 1) / w * rest, 1e-6 * all);
  EXPECT_GT(sfb.samplesPerS, off.samplesPerS);  // 12x fewer bytes on the slow link
  // At 512 rows per rank no layer pays: auto is the plain allreduce.
  EXPECT_NEAR(plan::simulate(wideMlp("auto", 512), m, o).bytesPerRank, 2 * (w - 1) / w * all, 1e-6 * all);
}

TEST(PlanSimulator, AModelWithoutAProfileTakesItsMeasuresFromTheMachineFile) {
  // resnet-20 has no analytic profile: without a "models" entry the simulator
  // refuses it; with one, calibrate's whole-model layer gives the times and
  // the activations (bytes held after forward over 32 samples: 1e5 a sample).
  api::RunConfig rc;
  rc.train.model = "resnet-20";
  rc.train.dataset = "synthetic";
  rc.train.batchSize = 16;
  const api::RunConfig prepared = api::prepared(rc, api::sourcesFromValues(rc));
  try {
    plan::simulate(prepared, plan::parseMachine(kCluster, "plain"));
    ADD_FAILURE() << "simulated a model it has no profile or measurement of";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no cost profile for --model resnet-20"), std::string::npos) << e.what();
  }
  std::string text = kCluster;
  text.insert(text.rfind('}'), R"(, "models": {"resnet-20": {"micro_batches": {"32": {"forward_s": 0.2,
      "backward_s": 0.4, "update_s": 0.001, "layers": [{"name": "model", "params": 272186, "forward_s": 0.2,
      "backward_s": 0.4, "activation_bytes": 3200000}]}}}})");
  const plan::Prediction p = plan::simulate(prepared, plan::parseMachine(text, "calibrated"));
  EXPECT_NEAR(p.computeS, 0.3, 1e-9);  // half the measured micro-batch
  ASSERT_EQ(p.memory.size(), 1u);
  EXPECT_NEAR(static_cast<double>(p.memory[0].activationsPeak), 16 * 1e5, 1e3);
}

TEST(PlanSimulator, CompressionShrinksEachFusionBucketNotTheirNumber) {
  // The trainer cuts buckets from the fp32 gradients (--fusion-mb) and then
  // compresses each: fp16 sends as many calls as fp32, each half the bytes.
  // Latency only (1 s a message, unbounded bandwidth): the same time.
  std::string text = kCluster;
  const std::string fast = R"("inter_host": {"alpha_s": 1, "bytes_per_s": 1e15})";
  text.replace(text.find(R"("inter_host")"), std::string(R"("inter_host": {"alpha_s": 2e-4, "bytes_per_s": 1.25e7})").size(), fast);
  const plan::Machine m = plan::parseMachine(text, "latency");
  api::RunConfig rc;
  rc.train.model = "mlp";
  rc.train.dataset = "synthetic";
  rc.train.backend = "mpi";
  rc.train.workers = 4;
  rc.train.allreduceAlgo = "ring";
  plan::SimulateOptions o;
  o.hosts = 4;
  const plan::Prediction none = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  rc.train.compress = "fp16";
  const plan::Prediction fp16 = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  EXPECT_GT(none.commS, 4.0);  // 5 buckets of 1,077,288 bytes, 6 ring steps each
  EXPECT_NEAR(fp16.commS, none.commS, 1e-6 * none.commS);
  EXPECT_NEAR(fp16.bytesPerRank, none.bytesPerRank / 2, 1e-6 * none.bytesPerRank);
}

TEST(PlanSimulator, EveryStepEndsWithTheStopCheckAndLoggedStepsWithTheLoss) {
  // Between steps the ranks sum one number (any rank stopping?), and on each
  // logged step the loss: two 8-byte allreduces across the hosts, one
  // every step, one every --log-every steps. A parameter server's run has none.
  const plan::Machine m = plan::parseMachine(kCluster, "test");
  plan::SimulateOptions o;
  o.hosts = 4;
  auto step = [&](const std::string& strategy, int64_t logEvery) {
    api::RunConfig rc;
    rc.train.model = "mlp";
    rc.train.dataset = "synthetic";
    rc.train.backend = "mpi";
    rc.train.workers = 4;
    rc.train.strategy = strategy;
    rc.train.logEvery = logEvery;
    return plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o).stepS;
  };
  plan::Placement spread;
  spread.threads = false;
  spread.hosts = 4;
  spread.ranksPerHost = 1;
  const plan::RankGroup world{4, 4, 1, 1};
  const double sum = plan::allreduceTime(m, spread, world, 8, "auto");
  EXPECT_GT(sum, 4e-4);  // two latencies at least: a tree over 4 hosts
  EXPECT_NEAR(step("allreduce", 1) - step("allreduce", 1000), sum * (1 - 1e-3), 1e-9);
  EXPECT_NEAR(step("ps", 1), step("ps", 1000), 1e-12);
}

TEST(PlanSimulator, SynchronousParameterServersOverlapOneWorkersTransfer) {
  // 1 server and 3 workers on 4 hosts: the server's link carries 3 pushes and
  // 3 pulls of the gradient's 1,077,288 bytes, one worker's transfer of which
  // overlaps (the first worker back pushes while the others pull).
  const plan::Machine m = plan::parseMachine(kCluster, "test");
  api::RunConfig rc;
  rc.train.model = "mlp";
  rc.train.dataset = "synthetic";
  rc.train.backend = "mpi";
  rc.train.strategy = "ps";
  rc.train.servers = 1;
  rc.train.workers = 3;
  plan::SimulateOptions o;
  o.hosts = 4;
  const double g = 1077288, alpha = 2e-4, bw = 1.25e7;
  rc.train.consistency = "sync";
  const plan::Prediction sync = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  EXPECT_NEAR(sync.commS, 2 * alpha + (3 * 2 * g - g) / bw, 1e-9);
  rc.train.consistency = "async";
  const plan::Prediction async = plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), m, o);
  EXPECT_NEAR(async.commS, 2 * alpha + 3 * 2 * g / bw, 1e-9);  // no step to wait for: no overlap counted
}

// Every strategy the registry knows has a cost model the simulator finds by
// its registration, or is refused with one line (fedavg: rounds of sampled
// clients, not steps): none is predicted as another.
TEST(PlanSimulator, EveryStrategyHasACostModelOrIsRefused) {
  const std::set<std::string> refused = {"fedavg"};
  for (const auto& name : api::strategyNames()) {
    if (refused.count(name)) {
      EXPECT_THROW(plan::strategyCost(name), UsageError) << name;
      continue;
    }
    const plan::StrategyCost& cost = plan::strategyCost(name);
    EXPECT_TRUE(static_cast<bool>(cost.sync)) << name;
    EXPECT_FALSE(cost.syncTerm.empty()) << name;
  }
  EXPECT_THROW(plan::strategyCost("gossip-of-the-future"), UsageError);
}
