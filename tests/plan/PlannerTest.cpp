// dtrain plan: what it writes is a configuration the trainer runs unchanged;
// every ranked candidate passes the configuration checker; lossy choices are
// marked; the search is large enough to matter.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "api/ConfigFile.h"
#include "api/Train.h"
#include "cli/CliRunner.h"
#include "plan/LossyCosts.h"
#include "plan/Planner.h"

using namespace dtrain;

namespace {

std::string corpus() {
  static const std::string path = [] {
    const std::string p = test::tempDir() + "/text.txt";
    std::ofstream f(p);
    for (int i = 0; i < 400; ++i) f << "and god said, let there be light: and there was light. ";
    return p;
  }();
  return path;
}

plan::Machine cluster(const std::string& name) {
  return plan::readMachine(std::string(DTRAIN_PLAN_CLUSTERS) + "/" + name);
}

plan::PlanRequest request(const std::string& model, int64_t globalBatch, int hosts, int ranksPerHost) {
  plan::PlanRequest r;
  r.model = model;
  r.globalBatch = globalBatch;
  r.hosts = hosts;
  r.ranksPerHost = ranksPerHost;
  return r;
}

}  // namespace

TEST(PlanPlanner, TheBestConfigurationTrainsUnchanged) {
  plan::PlanRequest r = request("gpt-tiny", 8, 1, 2);
  r.base.train.textFile = corpus();
  r.base.train.evalBatches = 1;
  const plan::PlanResult res = plan::plan(r, cluster("example-cpu.json"));
  ASSERT_FALSE(res.ranked.empty());
  EXPECT_GT(res.enumerated, 50);
  bool sawPipeline = false, sawLossy = false;
  for (const auto& c : res.ranked) {
    // Each candidate's TOML reads back into the same configuration.
    const std::string toml = api::configToToml(c.config);
    const api::RunConfig again = api::configFromToml(toml);
    EXPECT_EQ(api::configToToml(api::prepared(again, api::sourcesFromValues(again))), toml) << c.summary;
    sawPipeline = sawPipeline || c.config.train.pipelineStages > 1;
    sawLossy = sawLossy || !c.lossy.empty();
    EXPECT_EQ(c.lossy.empty(), plan::lossyChoice(c.config.train).empty());
  }
  EXPECT_TRUE(sawPipeline);
  EXPECT_TRUE(sawLossy);
  for (size_t i = 1; i < res.ranked.size(); ++i)
    EXPECT_GE(res.ranked[i - 1].prediction.samplesPerS, res.ranked[i].prediction.samplesPerS);
  // The best lossless one and the best pipeline, as written, for two steps.
  const plan::Candidate* best = nullptr;
  const plan::Candidate* pipe = nullptr;
  for (const auto& c : res.ranked) {
    if (!best && c.lossy.empty()) best = &c;
    if (!pipe && c.config.train.pipelineStages > 1) pipe = &c;
  }
  for (const plan::Candidate* c : {best, pipe}) {
    ASSERT_NE(c, nullptr);
    api::RunConfig rc = api::configFromToml(api::configToToml(c->config));
    rc.train.maxSteps = 2;
    rc.train.progress = runtime::TrainConfig::Progress::Off;
    const nlohmann::json out = api::train(rc);
    EXPECT_EQ(out.at("steps").get<int64_t>(), 2) << c->summary;
  }
}

TEST(PlanPlanner, CliWritesAConfigThatTrainTakes) {
  const std::string dir = test::tempDir();
  const std::string best = dir + "/best.toml", base = dir + "/base.toml";
  std::ofstream(base) << "[data]\nname = \"synthetic\"\nsynthetic_size = 256\n[training]\nmax_steps = 2\n"
                         "[logging]\nprogress = \"off\"\n";
  const auto r = test::runDtrain("plan --model mlp --global-batch 32 --hosts 1 --ranks-per-host 2 --machine " +
                                 std::string(DTRAIN_PLAN_CLUSTERS) + "/example-cpu.json --config " + base +
                                 " --write-config " + best + " --json --top 3");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int lossless = 0, lossy = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_GT(j.at("samples_per_s").get<double>(), 0);
    EXPECT_TRUE(j.at("config").is_string());
    EXPECT_TRUE(j.at("memory_per_rank").is_array());
    // The lossless ones first, then the lossy ones, marked.
    if (j.contains("lossy")) ++lossy;
    else EXPECT_EQ(lossy, 0) << line;
    if (!j.contains("lossy")) ++lossless;
  }
  EXPECT_EQ(lossless, 3);
  EXPECT_EQ(lossy, 3);
  const auto t = test::runDtrain("train --config " + best);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(nlohmann::json::parse(t.lastLine()).at("steps").get<int64_t>(), 2);
  test::expectError(test::runDtrain("plan --model mlp --global-batch 3x --machine " + std::string(DTRAIN_PLAN_CLUSTERS) +
                                    "/example-cpu.json"), 2, "not an integer (or auto)");
}

TEST(PlanPlanner, AutoGlobalBatchIsTheLargestThatFits) {
  plan::PlanRequest r;
  r.model = "mlp";
  r.hosts = 1;
  r.ranksPerHost = 2;
  r.base.train.dataset = "synthetic";
  r.base.train.syntheticSize = 4096;
  r.base.train.batchSize = 32;
  r.base.train.lr = 0.1;
  const plan::Machine m = plan::readMachine(std::string(DTRAIN_PLAN_CLUSTERS) + "/example-cpu.json");
  // A limit between what batch B and 2B need: the largest fitting batch, from a
  // plain search at each size's edge.
  auto fits = [&](int64_t batch, double limit) {
    plan::PlanRequest q = r;
    q.globalBatch = batch;
    q.memoryPerRank = limit;
    for (const auto& c : plan::plan(q, m).ranked)
      if (c.lossy.empty() && c.prediction.layout.microBatches == 1) return true;
    return false;
  };
  double limit = 0;
  {
    plan::PlanRequest q = r;
    q.globalBatch = 512;
    double smallest = 1e30;
    for (const auto& c : plan::plan(q, m).ranked)
      if (c.lossy.empty() && c.prediction.layout.microBatches == 1) smallest = std::min(smallest, c.peakBytes);
    limit = smallest * 1.001;  // 512 fits (just), 1024 does not
  }
  r.memoryPerRank = limit;
  const plan::AutoBatch a = plan::autoGlobalBatch(r, m);
  EXPECT_EQ(a.globalBatch, 512);  // 2 ranks x 256: the largest power of two that fits
  EXPECT_TRUE(fits(a.globalBatch, limit));
  EXPECT_FALSE(fits(2 * a.globalBatch, limit));
  EXPECT_EQ(a.plans, 10);  // 2, 4, ..., 1024 (which does not fit)
  // The linear scaling rule from the base's batch and lr; 5 epochs of warmup.
  EXPECT_DOUBLE_EQ(a.lr, 0.1 * static_cast<double>(a.globalBatch) / 32);
  EXPECT_EQ(a.warmupSteps, (5 * 4096 + a.globalBatch - 1) / a.globalBatch);
  ASSERT_FALSE(a.result.ranked.empty());
  EXPECT_DOUBLE_EQ(a.result.ranked[0].config.train.lr, a.lr);
  EXPECT_EQ(a.result.ranked[0].config.train.warmupSteps, a.warmupSteps);
  EXPECT_LE(a.result.ranked[0].peakBytes, limit);
}

TEST(PlanPlanner, CliAutoGlobalBatchSaysWhatItChose) {
  const std::string dir = test::tempDir();
  const std::string best = dir + "/auto.toml";
  const auto r = test::runDtrain("plan --model mlp --global-batch auto --memory-per-rank 256MiB --hosts 1 "
                                 "--ranks-per-host 2 --machine " + std::string(DTRAIN_PLAN_CLUSTERS) +
                                 "/example-cpu.json --write-config " + best + " --top 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("global batch auto: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("linear scaling rule"), std::string::npos) << r.out;
  std::ifstream in(best);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("warmup_steps = "), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("warmup_steps = 0\n"), std::string::npos) << text.str();
  test::expectError(test::runDtrain("plan --model mlp --global-batch auto --memory-per-rank 1KiB --machine " +
                                    std::string(DTRAIN_PLAN_CLUSTERS) + "/example-cpu.json"),
                    2, "not even one sample per rank fits");
}

TEST(PlanPlanner, SearchesOverAThousandCandidatesOnACluster) {
  plan::PlanRequest r = request("gpt-base", 512, 4, 8);
  const plan::PlanResult res = plan::plan(r, cluster("selene-a100.json"));
  EXPECT_GE(res.enumerated, 1000);
  EXPECT_FALSE(res.ranked.empty());
  std::printf("plan: %lld candidates, %lld refused, %zu ranked in %.2f s\n", static_cast<long long>(res.enumerated),
              static_cast<long long>(res.rejected), res.ranked.size(), res.seconds);
}

// Emulated hosts (shared cores, token buckets): every candidate's step is its
// terms' sum, none negative, and no shorter than its compute, also where a
// pipeline's sums on the links find fuller buckets than the bare run counts.
TEST(PlanPlanner, EveryCandidatesTermsAreNonNegative) {
  const plan::Machine m = plan::parseMachine(R"({"format": "dtrain-machine-1", "devices_per_host": 1,
    "shared_cores": 2, "async_sends": false, "memory_per_device_bytes": 4e9,
    "compute": {"flops_per_s": {"fp32": 1e10}, "memory_bytes_per_s": 1e10},
    "links": {"inter_host": {"alpha_s": 2e-5, "bytes_per_s": 1.2e8, "burst_bytes": 131072}}})", "emulated");
  const plan::PlanResult res = plan::plan(request("mlp", 256, 4, 1), m);
  ASSERT_FALSE(res.ranked.empty());
  for (const auto& c : res.ranked) {
    const plan::Prediction& p = c.prediction;
    for (double term : {p.computeS, p.bubbleS, p.exposedCommS, p.optimizerS}) EXPECT_GE(term, 0) << c.summary;
    EXPECT_NEAR(p.stepS, p.computeS + p.bubbleS + p.exposedCommS + p.optimizerS, 1e-12) << c.summary;
    EXPECT_GE(p.stepS, p.computeS) << c.summary;
  }
}

// A wide mlp at small batches on a slow link: the planner tries --sfb auto
// (lossless) and ranks it above the plain allreduce.
TEST(PlanPlanner, SufficientFactorsAreACandidateWhereTheyPay) {
  plan::PlanRequest r = request("mlp", 64, 4, 1);
  r.base.train.mlpHidden = {2048, 2048};
  const plan::PlanResult res = plan::plan(r, cluster("example-cpu.json"));
  const plan::Candidate* sfb = nullptr;
  const plan::Candidate* plain = nullptr;
  for (const auto& c : res.ranked) {
    const auto& t = c.config.train;
    if (t.strategy != "allreduce" || t.zero != 0 || t.compress != "none" || t.accumulate != 1) continue;
    if (!sfb && t.sfb == "auto") sfb = &c;
    if (!plain && t.sfb == "off") plain = &c;
  }
  ASSERT_NE(sfb, nullptr);
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(sfb->lossy.empty());
  EXPECT_NE(sfb->summary.find("sfb auto"), std::string::npos) << sfb->summary;
  EXPECT_GT(sfb->prediction.samplesPerS, plain->prediction.samplesPerS);
}

// Lossy candidates carry the accuracy cost PERFORMANCE.md measured for them
// (or say at which setting it was measured); lossless ones none.
TEST(PlanPlanner, LossyChoicesShowTheirMeasuredAccuracyCost) {
  plan::PlanRequest r = request("mlp", 256, 4, 1);
  const plan::PlanResult res = plan::plan(r, cluster("example-cpu.json"));
  int lossy = 0;
  for (const auto& c : res.ranked) {
    const std::string cost = plan::measuredAccuracyCost(c.config.train);
    if (c.lossy.empty()) {
      EXPECT_EQ(cost, "") << c.summary;
      continue;
    }
    ++lossy;
    if (c.config.train.compress == "bf16") continue;  // not measured
    EXPECT_EQ(cost.rfind("measured", 0), 0u) << c.summary << ": " << cost;
    if (c.config.train.compress == "topk") {
      EXPECT_NE(cost.find("-1.27 accuracy points"), std::string::npos) << cost;
    }
  }
  EXPECT_GT(lossy, 3);
  runtime::TrainConfig t;
  t.compress = "powersgd";
  t.compressRank = 1;
  EXPECT_EQ(plan::measuredAccuracyCost(t).rfind("measured at rank 2: ", 0), 0u) << plan::measuredAccuracyCost(t);
}

// With --optimizer lbfgs in the base configuration, Sandblaster (with and
// without parameter shards) is a candidate, and the one ranked trains as written.
TEST(PlanPlanner, SandblasterIsACandidateForLbfgs) {
  plan::PlanRequest r = request("mlp", 4096, 1, 6);
  r.base.train.optimizer = "lbfgs";
  r.base.train.lr = 1;
  r.base.train.dataset = "synthetic";
  r.base.train.syntheticSize = 8192;
  const plan::PlanResult res = plan::plan(r, cluster("example-cpu.json"));
  const plan::Candidate* sb = nullptr;
  for (const auto& c : res.ranked)
    if (c.config.train.strategy == "sandblaster" && !sb) sb = &c;
  ASSERT_NE(sb, nullptr);
  EXPECT_TRUE(sb->lossy.empty());
  EXPECT_NE(sb->summary.find("sandblaster"), std::string::npos) << sb->summary;
  EXPECT_GT(sb->prediction.samplesPerS, 0);
  api::RunConfig rc = api::configFromToml(api::configToToml(sb->config));
  rc.train.maxSteps = 1;
  rc.train.progress = runtime::TrainConfig::Progress::Off;
  EXPECT_EQ(api::train(rc).at("steps").get<int64_t>(), 1) << sb->summary;
}
