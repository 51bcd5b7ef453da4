// The simulated FedAvg runner on the synthetic dataset (no data files, a few seconds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "autograd/Ops.h"
#include "federated/FederatedRunner.h"
#include "federated/PrivacyAccountant.h"
#include "runtime/Task.h"

namespace dtrain::federated {
namespace {

runtime::TrainConfig smallConfig() {
  runtime::TrainConfig c;
  c.model = "mlp";
  c.dataset = "synthetic";
  c.syntheticSize = 600;
  c.lr = 0.1;
  c.seed = 5;
  c.progress = runtime::TrainConfig::Progress::Off;
  return c;
}

std::vector<float> flat(nn::Module& m) {
  std::vector<float> v(static_cast<size_t>(flatSize(m)));
  readFlat(m, v);
  return v;
}

TEST(FederatedRunner, FedSgdRoundIsOneFullBatchStepWeightedBySamples) {
  // E = 1, B = 0, every client, server averaging: the n_k-weighted mean of the clients'
  // one-step deltas is -lr times the gradient of the mean loss over all their samples.
  auto c = smallConfig();
  FederatedOptions o;
  o.clients = 3;
  o.clientFraction = 1;
  o.localEpochs = 1;
  o.localBatch = 0;
  o.quantitySkew = 1.0;  // unequal n_k: the weighting matters
  FederatedRunner runner(c, o);
  const auto before = flat(runner.globalModel());
  runner.runRound(1);
  const auto after = flat(runner.globalModel());

  auto data = runtime::loadTaskData(c, false);
  auto model = nn::buildModel(c.model, {}, c.seed);
  writeFlat(*model, before);
  std::vector<int64_t> all;
  for (const auto& part : runner.clientSamples()) all.insert(all.end(), part.begin(), part.end());
  ASSERT_EQ(all.size(), 600u);
  ASSERT_NE(runner.clientSamples()[0].size(), runner.clientSamples()[1].size());
  data::Batch b = data.train->batch(all);
  model->zeroGrad();
  autograd::crossEntropy(model->forward(autograd::Variable(b.x)), b.y).backward();
  size_t at = 0;
  double maxErr = 0, maxStep = 0;
  for (auto& [name, p] : model->namedParameters()) {
    const float* g = p.grad().data<float>();
    for (int64_t k = 0; k < p.numel(); ++k, ++at) {
      const double expected = before[at] - c.lr * g[k];
      maxErr = std::max(maxErr, std::fabs(static_cast<double>(after[at]) - expected));
      maxStep = std::max(maxStep, std::fabs(static_cast<double>(after[at]) - before[at]));
    }
  }
  EXPECT_GT(maxStep, 1e-4);
  EXPECT_LT(maxErr, 1e-5);
}

TEST(FederatedRunner, WorkerThreadsDoNotChangeTheResult) {
  FederatedOptions o;
  o.clients = 12;
  o.clientFraction = 0.5;
  o.clientDropout = 0.2;
  o.partition = "shards";
  std::vector<float> results[2];
  for (int workers : {1, 2}) {
    auto c = smallConfig();
    c.workers = workers;
    FederatedRunner runner(c, o);
    for (int64_t r = 1; r <= 2; ++r) runner.runRound(r);
    results[workers - 1] = flat(runner.globalModel());
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(FederatedRunner, LearnsAndCountsBytesAndDropouts) {
  auto c = smallConfig();
  FederatedOptions o;
  o.clients = 10;
  o.clientFraction = 0.5;
  o.clientDropout = 0.5;
  FederatedRunner runner(c, o);
  const double before = runner.evaluate()["test_accuracy"].get<double>();
  int reported = 0, selected = 0;
  for (int64_t r = 1; r <= 6; ++r) {
    const RoundStats s = runner.runRound(r);
    EXPECT_EQ(s.selected, 5);
    EXPECT_EQ(s.bytesDown, 5 * 4 * runner.globalModel().parameterCount());
    EXPECT_EQ(s.bytesUp, s.reported * 4 * runner.globalModel().parameterCount());
    reported += s.reported;
    selected += s.selected;
  }
  EXPECT_LT(reported, selected);  // some dropped out
  EXPECT_GT(reported, 0);
  const double after = runner.evaluate()["test_accuracy"].get<double>();
  EXPECT_GT(after, before + 0.3);
}

double accuracyUnderAttack(std::string aggregator) {
  auto c = smallConfig();
  FederatedOptions o;
  o.clients = 10;
  o.clientFraction = 1;
  o.attack = aggregator == "none" ? "none" : "sign-flip";
  o.attackers = aggregator == "none" ? 0 : 0.3;
  if (aggregator == "none") aggregator = "mean";
  o.aggregator = aggregator;
  o.byzantine = 3;
  FederatedRunner runner(c, o);
  for (int64_t r = 1; r <= 4; ++r) runner.runRound(r);
  return runner.evaluate()["test_accuracy"].get<double>();
}

TEST(FederatedRunner, MedianSurvivesASignFlipAttackThatBreaksTheMean) {
  const double mean = accuracyUnderAttack("mean");
  const double median = accuracyUnderAttack("median");
  const double krum = accuracyUnderAttack("multi-krum");
  const double honest = accuracyUnderAttack("none");
  // Without attackers the task is learned; the attack pulls the mean far off, the
  // median (biased by the attackers, still pointing the right way) and multi-krum
  // (which drops them) keep learning.
  EXPECT_GT(honest, 0.9);
  EXPECT_LT(mean, 0.4);
  EXPECT_GT(median, 0.6);
  EXPECT_GT(krum, 0.9);
}

TEST(FederatedRunner, DpEpsilonFollowsTheAccountant) {
  auto c = smallConfig();
  FederatedOptions o;
  o.clients = 20;
  o.clientFraction = 0.25;
  o.dpClip = 1.0;
  o.dpNoise = 1.0;
  FederatedRunner runner(c, o);
  RdpAccountant reference;
  for (int64_t r = 1; r <= 3; ++r) {
    const RoundStats s = runner.runRound(r);
    reference.step(0.25, 1.0);
    ASSERT_TRUE(s.epsilon);
    EXPECT_DOUBLE_EQ(*s.epsilon, reference.epsilon(1e-5));
  }
  o.dpNoise = 0;  // clipping only: no privacy
  FederatedRunner clipped(c, o);
  EXPECT_EQ(*clipped.runRound(1).epsilon, std::numeric_limits<double>::infinity());
}

std::vector<std::vector<float>> modelsAfterRounds(FederatedOptions o, int rounds) {
  o.clients = 6;
  o.clientFraction = 0.5;
  FederatedRunner runner(smallConfig(), o);
  std::vector<std::vector<float>> out{flat(runner.globalModel())};
  for (int64_t r = 1; r <= rounds; ++r) {
    runner.runRound(r);
    out.push_back(flat(runner.globalModel()));
  }
  return out;
}

double distance(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
  return std::sqrt(d);
}

TEST(FederatedRunner, ServerMomentumStartsAsAveragingThenDiffers) {
  FederatedOptions avg, momentum;
  momentum.serverOptimizer = "momentum";
  const auto a = modelsAfterRounds(avg, 2), m = modelsAfterRounds(momentum, 2);
  EXPECT_EQ(a[1], m[1]);  // the first momentum buffer is the first delta
  EXPECT_GT(distance(a[2], m[2]), 1e-4);
  FederatedOptions adam;
  adam.serverOptimizer = "adam";
  const auto d = modelsAfterRounds(adam, 1);
  EXPECT_GT(distance(d[0], d[1]), 1e-3);
}

TEST(FederatedRunner, ProximalTermKeepsClientsNearTheGlobalModel) {
  FederatedOptions plain, prox;
  plain.localEpochs = prox.localEpochs = 3;
  prox.proxMu = 5.0;
  const auto a = modelsAfterRounds(plain, 1), p = modelsAfterRounds(prox, 1);
  EXPECT_LT(distance(p[0], p[1]), 0.8 * distance(a[0], a[1]));
}

// --secure-aggregation: the same global model as plain FedAvg up to the fixed
// point (2^-24 per client per value), with and without dropouts (the same
// clients drop: the seed picks them); a round with fewer reporters than the
// threshold is skipped, the model unchanged. Every round starts both from the
// plain run's model: a difference of 1e-7 carried into the next round's local
// training can flip a ReLU and grow (it did, to 3e-4, with AVX-512 kernels).
TEST(FederatedRunner, SecureAggregationGivesThePlainMean) {
  auto c = smallConfig();
  for (double dropout : {0.0, 0.3}) {
    FederatedOptions o;
    o.clients = 10;
    o.clientFraction = 0.6;
    o.clientDropout = dropout;
    FederatedRunner plain(c, o);
    o.secureAggregation = true;
    o.secaggThreshold = 2;
    FederatedRunner secure(c, o);
    double largest = 0;
    for (int64_t r = 1; r <= 3; ++r) {
      const RoundStats a = plain.runRound(r), b = secure.runRound(r);
      EXPECT_EQ(a.reported, b.reported);
      EXPECT_GT(b.bytesUp, a.bytesUp) << "keys and shares travel too";
      const auto x = flat(plain.globalModel()), y = flat(secure.globalModel());
      double maxDiff = 0;
      for (size_t i = 0; i < x.size(); ++i) maxDiff = std::max(maxDiff, std::abs(double(x[i]) - y[i]));
      EXPECT_LT(maxDiff, 1e-5) << "dropout " << dropout << " round " << r;
      largest = std::max(largest, maxDiff);
      writeFlat(secure.globalModel(), x);  // the server optimizer (plain SGD) holds no state
    }
    EXPECT_GT(largest, 0.0) << "dropout " << dropout << ": no quantization at all?";
  }
  FederatedOptions o;
  o.clients = 10;
  o.clientFraction = 0.6;
  o.clientDropout = 0.5;
  o.secureAggregation = true;
  o.secaggThreshold = 6;  // every selected client must report
  FederatedRunner strict(c, o);
  bool skipped = false;
  for (int64_t r = 1; r <= 4 && !skipped; ++r) {
    const auto before = flat(strict.globalModel());
    const RoundStats s = strict.runRound(r);
    if (s.reported < 6) {
      EXPECT_EQ(flat(strict.globalModel()), before) << "round " << r;
      skipped = true;
    }
  }
  EXPECT_TRUE(skipped) << "no round lost a client at dropout 0.5";
}

// --round-deadline-s on the simulated clock: 10 clients of 60 samples, 3 of
// them 10x slow: at 1000 samples/s a normal client needs 0.06 s, a slow one
// 0.6 s, so a 0.1 s deadline leaves exactly the slow three out of every round
// (their updates never count), and a 1 s deadline none.
TEST(FederatedRunner, RoundDeadlineLeavesOutTheSlowClients) {
  auto c = smallConfig();
  FederatedOptions o;
  o.clients = 10;
  o.clientFraction = 1;
  o.slowClients = 0.3;
  o.slowFactor = 10;
  o.clientSpeed = 1000;
  o.roundDeadlineS = 0.1;
  FederatedRunner tight(c, o);
  for (int64_t r = 1; r <= 2; ++r) {
    const RoundStats s = tight.runRound(r);
    EXPECT_EQ(s.late, 3) << "round " << r;
    EXPECT_EQ(s.reported, 7) << "round " << r;
  }
  o.roundDeadlineS = 1.0;
  FederatedRunner loose(c, o);
  o.roundDeadlineS = 0;
  FederatedRunner none(c, o);
  for (int64_t r = 1; r <= 2; ++r) {
    const RoundStats s = loose.runRound(r);
    EXPECT_EQ(s.late, 0);
    EXPECT_EQ(s.reported, 10);
    none.runRound(r);
  }
  EXPECT_EQ(flat(loose.globalModel()), flat(none.globalModel()));
  EXPECT_NE(flat(tight.globalModel()), flat(none.globalModel()));
}

TEST(FederatedRunner, BadOptionsAreUsageErrors) {
  auto c = smallConfig();
  FederatedOptions o;
  o.clients = 10;
  o.clientFraction = 0.3;
  o.aggregator = "krum";
  o.byzantine = 1;  // needs 5 per round, gets 3
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o = {};
  o.dpNoise = 1;  // without --dp-clip
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o = {};
  o.clients = 601;
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o = {};
  o.secureAggregation = true;
  o.aggregator = "median";  // needs the individual updates
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o = {};
  o.secaggThreshold = 3;  // without --secure-aggregation
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o = {};
  o.slowFactor = 0.5;
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o = {};
  o.deadlineClock = "sundial";
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o = {};
  o.deadlineClock = "wall";  // real time needs real processes (--backend mpi)
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
  o.slowClients = 0.2;  // a simulated-clock setting
  EXPECT_THROW(FederatedRunner(c, o), UsageError);
}

}  // namespace
}  // namespace dtrain::federated
