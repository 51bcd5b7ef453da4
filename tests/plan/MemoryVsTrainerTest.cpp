// The predicted memory_per_rank against the trainer's own accounting for
// small runs (api::train, 2 steps): every category of every rank within 5%
// (ZeRO 3's peak, which varies run to run, within 12%); and the predicted
// bytes per rank against the bytes the ranks sent, within 1%.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "api/Train.h"
#include "cli/CliRunner.h"
#include "plan/MemoryModel.h"
#include "plan/Simulator.h"
#include "TestData.h"

using namespace dtrain;

namespace {

plan::Machine anyMachine() {
  return plan::parseMachine(R"({"format": "dtrain-machine-1", "devices_per_host": 2,
      "memory_per_device_bytes": 4e9, "compute": {"flops_per_s": {"fp32": 1e10}, "memory_bytes_per_s": 1e10},
      "links": {"intra_host": {"alpha_s": 1e-5, "bytes_per_s": 1e9}}})", "test");
}

std::string textFile() {
  static const std::string path = [] {
    const std::string p = test::tempDir() + "/text.txt";
    std::ofstream f(p);
    for (int i = 0; i < 400; ++i) f << "in the beginning god created the heaven and the earth. ";
    return p;
  }();
  return path;
}

api::RunConfig quick(const std::string& model) {
  api::RunConfig rc;
  auto& c = rc.train;
  c.model = model;
  c.maxSteps = 2;
  c.progress = runtime::TrainConfig::Progress::Off;
  c.optimizer = "adam";
  c.lr = 1e-3;
  if (model == "mlp") {
    c.dataset = "synthetic";
    c.syntheticSize = 256;
    c.batchSize = 16;
    c.evalBatch = 256;
  } else {
    c.textFile = textFile();
    c.evalBatches = 1;
    c.batchSize = 4;
  }
  return rc;
}

void expectWithin5Percent(api::RunConfig rc) {
  const nlohmann::json measured = api::train(rc);
  const api::RunConfig prepared = api::prepared(rc, api::sourcesFromValues(rc));
  const nlohmann::json predicted = plan::predictionJson(plan::simulate(prepared, anyMachine()));
  // The bytes a rank sends per step (gradients, ZeRO's gathers; the
  // tensor-parallel sums), where the run reports them (more than one rank).
  for (const char* key : {"bytes_sent_per_worker", "tp_bytes_sent_per_step"}) {
    if (!measured.contains(key)) continue;
    const double sent = measured.at(key).get<double>();
    EXPECT_NEAR(predicted.at("bytes_per_rank").get<double>(), sent, 0.01 * sent + 64)
        << key << " of " << rc.train.model << ", zero " << rc.train.zero << ", tp " << rc.train.tensorParallel;
  }
  const auto& m = measured.at("memory_per_rank");
  const auto& p = predicted.at("memory_per_rank");
  ASSERT_EQ(m.size(), p.size());
  for (size_t r = 0; r < m.size(); ++r)
    for (const char* key : {"parameters", "gradients", "optimizer_state", "activations_peak", "peak", "offloaded"}) {
      const double want = m[r].at(key).get<double>(), got = p[r].at(key).get<double>();
      // ZeRO 3's peak varies run to run (mlp: 4.16 or 4.57 MB): when the
      // gathered parameters are freed depends on the ranks' threads' timing.
      const double tolerance = rc.train.zero == 3 && std::string(key) == "peak" ? 0.12 : 0.05;
      EXPECT_NEAR(got, want, tolerance * want + 64) << key << " of rank " << r << " (" << rc.train.model << ", zero "
                                               << rc.train.zero << ", tp " << rc.train.tensorParallel << ")";
    }
}

}  // namespace

TEST(PlanMemory, MlpZeroStagesMatchTheTrainer) {
  for (int zero : {0, 1, 2, 3}) {
    api::RunConfig rc = quick("mlp");
    rc.train.workers = 2;
    rc.train.zero = zero;
    expectWithin5Percent(rc);
  }
  // Plain SGD (no optimizer state) on 4 ranks: the peak is set-up's, when
  // the parameters move into the fusion buckets' flat buffers.
  api::RunConfig sgd = quick("mlp");
  sgd.train.workers = 4;
  sgd.train.zero = 1;
  sgd.train.optimizer = "sgd";
  sgd.train.momentum = 0.0;
  sgd.train.batchSize = 64;
  expectWithin5Percent(sgd);
}

TEST(PlanMemory, FashionMnistIsInTheTrainersPeak) {
  // One process holds the training set and, reporting, the test set (180 + 30
  // MiB) beside the model: its peak matches the trainer's. Local ranks share
  // one copy loaded outside them: not in theirs.
  if (!test::haveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  api::RunConfig one = quick("mlp");
  one.train.dataset = "fashion-mnist";
  one.train.syntheticSize = runtime::TrainConfig{}.syntheticSize;
  one.train.evalBatch = 1000;
  expectWithin5Percent(one);
  const auto data = plan::knownDataset("fashion-mnist");
  ASSERT_TRUE(data);
  const api::RunConfig prepared = api::prepared(one, api::sourcesFromValues(one));
  const auto peak = plan::simulate(prepared, anyMachine()).memory.at(0).peak;
  EXPECT_GT(peak, data->bytes(60000) + data->bytes(10000));
  api::RunConfig local = one;
  local.train.workers = 2;
  expectWithin5Percent(local);
}

TEST(PlanMemory, GptTinyZeroStagesMatchTheTrainer) {
  for (int zero : {0, 1, 2, 3}) {
    api::RunConfig rc = quick("gpt-tiny");
    rc.train.workers = 2;
    rc.train.zero = zero;
    expectWithin5Percent(rc);
  }
}

TEST(PlanMemory, GptTinyTensorParallelAndRecomputeMatchTheTrainer) {
  api::RunConfig tp = quick("gpt-tiny");
  tp.train.workers = 2;
  tp.train.tensorParallel = 2;
  expectWithin5Percent(tp);
  api::RunConfig rec = quick("gpt-tiny");
  rec.train.nLayer = 4;
  rec.train.recompute = "blocks";
  expectWithin5Percent(rec);
}

TEST(PlanMemory, MlpTensorParallelActivationsMatchTheTrainer) {
  // The Linear -> ReLU -> Linear pair's activations: part cut, part whole.
  for (int tp : {2, 4}) {
    api::RunConfig rc = quick("mlp");
    rc.train.workers = tp;
    rc.train.tensorParallel = tp;
    rc.train.batchSize = 256;
    rc.train.syntheticSize = 1024;  // two steps: the second holds the optimizer's state and the activations
    expectWithin5Percent(rc);
  }
}

TEST(PlanMemory, OffloadMatchesTheTrainer) {
  api::RunConfig optimizer = quick("mlp");
  optimizer.train.offload = "optimizer";
  expectWithin5Percent(optimizer);
  api::RunConfig params = quick("mlp");
  params.train.workers = 2;
  params.train.zero = 3;
  params.train.offload = "params";
  expectWithin5Percent(params);
}

TEST(PlanMemory, PipelineStagesPeaksMatchTheTrainer) {
  // Each stage's peak: its states, the micro-batches' activations it holds,
  // the step's posted receives and kept sends, the whole model every rank
  // builds first, and rank 0's timing of every layer on one micro-batch.
  // Within 5%. 1F1B's middle stages with many micro-batches peak at their
  // last steady forward, beside the outputs and input gradients sent so far.
  struct Case {
    const char* model;
    int stages, micro, workers;
    int64_t batch;
    const char* schedule;
  };
  // GPipe holds every micro-batch: the last stage's head and the first
  // stage's embedding count in full.
  for (const Case& k : {Case{"mlp", 4, 4, 4, 64, "1f1b"}, Case{"gpt-tiny", 2, 2, 2, 8, "1f1b"},
                        Case{"gpt-tiny", 2, 4, 2, 16, "gpipe"}, Case{"gpt-tiny", 4, 16, 4, 16, "1f1b"}}) {
    api::RunConfig rc = quick(k.model);
    rc.train.strategy = "pipeline";
    rc.train.pipelineSchedule = k.schedule;
    rc.train.workers = k.workers;
    rc.train.pipelineStages = k.stages;
    rc.train.microBatches = k.micro;
    rc.train.batchSize = k.batch;
    // The trainer balances the stages by the layers' times measured on rank
    // 0, the plan (no calibrated profile here) by their FLOPs: on a busy
    // machine one noisy timing moves a cut and the stages hold other layers.
    // The split under test is the plan's, handed to the trainer by hand.
    const plan::Prediction balanced =
        plan::simulate(api::prepared(rc, api::sourcesFromValues(rc)), anyMachine());
    rc.train.pipelineSplit.assign(balanced.layout.cuts.begin() + 1, balanced.layout.cuts.end());
    const nlohmann::json measured = api::train(rc);
    const api::RunConfig prepared = api::prepared(rc, api::sourcesFromValues(rc));
    const nlohmann::json predicted = plan::predictionJson(plan::simulate(prepared, anyMachine()));
    const auto& m = measured.at("memory_per_rank");
    const auto& p = predicted.at("memory_per_rank");
    ASSERT_EQ(m.size(), p.size()) << k.model;
    for (size_t r = 0; r < m.size(); ++r) {
      const double want = m[r].at("peak").get<double>(), got = p[r].at("peak").get<double>();
      EXPECT_NEAR(got, want, 0.05 * want) << k.model << " " << k.schedule << " stage " << r;
      for (const char* key : {"parameters", "gradients", "optimizer_state"})
        EXPECT_NEAR(p[r].at(key).get<double>(), m[r].at(key).get<double>(), 0.01 * m[r].at(key).get<double>() + 64)
            << key << " of " << k.model << " stage " << r;
    }
  }
}

TEST(PlanProfile, AnalyticParameterCountsAreTheBuiltModules) {
  for (const char* model : {"mlp", "gpt-tiny", "gpt-small", "gpt-base"}) {
    api::RunConfig rc = quick(model);
    EXPECT_EQ(plan::profileFor(rc).params(), plan::builtModelParams(rc)) << model;
  }
  api::RunConfig wide = quick("gpt-tiny");
  wide.train.nLayer = 3;
  wide.train.nEmbd = 96;
  wide.train.nHead = 3;
  wide.train.blockSize = 48;
  EXPECT_EQ(plan::profileFor(wide).params(), plan::builtModelParams(wide));
  api::RunConfig mlp = quick("mlp");
  mlp.train.mlpHidden = {64, 32, 16};
  EXPECT_EQ(plan::profileFor(mlp).params(), plan::builtModelParams(mlp));
}

TEST(PlanProfile, GptFlopsAreMegatronsFormula) {
  // Per sequence, forward + backward (3x forward): 72 s l h^2 (1 + s/(6h) + V/(12 l h)).
  const plan::GptShape s{24, 24, 2304, 2048, 51200};
  const plan::AnalyticModel p = plan::gptProfile("gpt-1.7b", s);
  const double l = 24, h = 2304, seq = 2048, V = 51200;
  EXPECT_NEAR(3 * p.forwardFlops(), 72 * seq * l * h * h * (1 + seq / (6 * h) + V / (12 * l * h)), 1e-6 * p.forwardFlops());
}

TEST(PlanTraffic, CompressionRatiosAreTheTrainers) {
  // The bytes a compressor sends per step over the fp32 gradient's, as the
  // trainer reports them: PowerSGD factors every 2-D parameter (the GPT's
  // embedding tables too), the rest go whole.
  for (const char* model : {"mlp", "gpt-tiny"})
    for (const char* compress : {"powersgd", "fp16", "onebit", "signsgd", "topk", "randomk", "qsgd"}) {
      api::RunConfig rc = quick(model);
      rc.train.workers = 2;
      rc.train.compress = compress;
      if (std::string(compress) == "powersgd") rc.train.compressStartStep = 0;
      const nlohmann::json measured = api::train(rc);
      const double ratio = measured.at("compressed_bytes_per_step").get<double>() /
                           measured.at("allreduce_bytes").get<double>();
      const api::RunConfig prepared = api::prepared(rc, api::sourcesFromValues(rc));
      EXPECT_NEAR(plan::compressionRatio(prepared.train, plan::profileFor(prepared)), ratio, 0.02 * ratio)
          << compress << " on " << model;
    }
}
