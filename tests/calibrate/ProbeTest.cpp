// The probes on real (tiny) work: the model profile and the local backend's
// collectives. Values are checked for shape and sign, never for speed.
#include <gtest/gtest.h>

#include <mutex>

#include "calibrate/CommProbe.h"
#include "calibrate/ModelTiming.h"
#include "comm/local/Local.h"
#include "core/Error.h"
#include "nn/LayerSequence.h"
#include "nn/ModelRegistry.h"

namespace dtrain::calibrate {
namespace {

TEST(AnalyticModel, MlpLayersAddUpToTheModel) {
  const ModelTimes t = profileModel({.model = "mlp", .microBatch = 4, .warmup = 1, .repeats = 2});
  auto model = nn::buildModel("mlp", {}, 1);
  const auto layers = nn::layerSequence(*model);
  ASSERT_EQ(t.layers.size(), layers.size());
  int64_t params = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(t.layers[i].name, layers[i].name);
    EXPECT_GE(t.layers[i].forwardS, 0);
    EXPECT_GE(t.layers[i].backwardS, 0);
    params += t.layers[i].params;
  }
  EXPECT_EQ(params, model->parameterCount());
  EXPECT_EQ(t.params, model->parameterCount());
  EXPECT_GT(t.forwardS, 0);
  EXPECT_GT(t.backwardS, 0);
  EXPECT_GT(t.updateS, 0);
  EXPECT_EQ(t.optimizer, "sgd");
  // The Linear layers keep their outputs for backward.
  EXPECT_GT(t.layers[1].activationBytes, 0);
}

TEST(AnalyticModel, GptTiedEmbeddingCountsOnce) {
  const ModelTimes t = profileModel({.model = "gpt-tiny", .microBatch = 1, .warmup = 1, .repeats = 1});
  int64_t params = 0;
  for (const auto& l : t.layers) params += l.params;
  EXPECT_EQ(params, t.params);
  EXPECT_EQ(t.layers.front().name, "embedding");
  EXPECT_EQ(t.layers.back().name, "head");
  EXPECT_EQ(t.optimizer, "adamw");
}

TEST(AnalyticModel, PassesGiveEachTimeItsMedian) {
  // Three passes, the second slow throughout (a busy moment of the machine):
  // every time is the other passes' middle one, the layers' too.
  auto pass = [](double scale, int64_t held) {
    ModelTimes t;
    t.optimizer = "sgd";
    t.params = 10;
    t.forwardS = 1 * scale, t.backwardS = 2 * scale, t.updateS = 0.5 * scale;
    t.layers = {{"a", 4, 0.4 * scale, 0.8 * scale, held}, {"b", 6, 0.6 * scale, 1.2 * scale, 2 * held}};
    return t;
  };
  const ModelTimes m = medianOfPasses({pass(1.0, 100), pass(1.7, 300), pass(1.1, 200)});
  EXPECT_DOUBLE_EQ(m.forwardS, 1.1);
  EXPECT_DOUBLE_EQ(m.backwardS, 2.2);
  EXPECT_DOUBLE_EQ(m.updateS, 0.55);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(m.layers[1].forwardS, 0.66);
  EXPECT_DOUBLE_EQ(m.layers[0].backwardS, 0.88);
  EXPECT_EQ(m.layers[1].activationBytes, 400);
  EXPECT_EQ(m.layers[1].params, 6);
  auto other = pass(1.0, 100);
  other.layers[0].name = "c";
  EXPECT_THROW(medianOfPasses({pass(1.0, 100), other}), Error);
  EXPECT_THROW(medianOfPasses({}), Error);
}

TEST(AnalyticModel, UnknownModelIsAUsageError) {
  EXPECT_THROW(profileModel({.model = "nope"}), UsageError);
}

ProbeResult probeThreads(int ranks, const ProbeConfig& cfg) {
  ProbeResult out;
  std::mutex m;
  comm::local::runLocal(ranks, [&](comm::Communicator& c) {
    ProbeResult r = probeComm(c, cfg);
    std::lock_guard<std::mutex> lock(m);
    if (c.rank() == 0) out = r;
  });
  return out;
}

TEST(CommProbe, LocalFitsArePositiveAndCoverEverySize) {
  const std::vector<size_t> sizes = {4096, 16384, 65536};
  ProbeConfig cfg{.sizes = sizes, .ranksPerHost = 2, .secondsPerRun = 0.002, .runs = 1, .hier = true};
  const ProbeResult r = probeThreads(4, cfg);
  EXPECT_GT(r.pointToPoint.alphaS, 0);
  EXPECT_GT(r.pointToPoint.bytesPerS, 0);
  ASSERT_EQ(r.pointToPointSamples.size(), sizes.size());
  std::vector<std::string> names;
  for (const auto& c : r.collectives) {
    names.push_back(c.name);
    EXPECT_EQ(c.ranks, 4);
    EXPECT_EQ(c.ranksPerHost, 2);
    EXPECT_GT(c.fit.alphaS, 0);
    EXPECT_GT(c.fit.bytesPerS, 0);
    ASSERT_EQ(c.samples.size(), sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(c.samples[i].bytes, sizes[i]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"allreduce_ring", "allreduce_hier", "allreduce_tree", "allreduce_rhd",
                                             "allgather_ring", "reduce_scatter_ring", "broadcast"}));
  // What the MPI ranks hand back reads back the same.
  const ProbeResult back = probeFromJson(toJson(r));
  EXPECT_EQ(toJson(back), toJson(r));
}

}  // namespace
}  // namespace dtrain::calibrate
