// api::train, the library's one call: a program's own registered model on
// data it holds in memory, under one process and two allreduce workers (equal
// to the CLI's rule: 2 x B = 1 x 2B), and options set in code that the run
// would ignore refused as flags are.
#include <gtest/gtest.h>

#include <cmath>

#include "api/Train.h"
#include "core/Error.h"
#include "core/Rng.h"
#include "data/Dataset.h"
#include "nn/Layers.h"
#include "nn/ModelRegistry.h"

using namespace dtrain;

namespace {

std::shared_ptr<data::Dataset> blobs(int64_t n, uint64_t seed) {
  Tensor x = Tensor::empty({n, 3});
  Tensor y = Tensor::empty({n}, DType::I32);
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int cls = static_cast<int>(i % 3);
    for (int j = 0; j < 3; ++j) x.data<float>()[3 * i + j] = (j == cls ? 2.0f : 0.0f) + 0.3f * rng.normal();
    y.data<int32_t>()[i] = cls;
  }
  return std::make_shared<data::TensorDataset>(x, y, 3);
}

// A user's classifier: one hidden layer sized from the data.
void registerTiny() {
  static bool done = false;
  if (done) return;
  done = true;
  nn::registerModel("tiny-user-net", nn::classifier([](const nn::DataShape& d, uint64_t seed) {
    Rng rng(seed);
    auto m = std::make_shared<nn::Sequential>();
    m->append(std::make_shared<nn::Linear>(d.sample[0], 16, rng));
    m->append(std::make_shared<nn::ReLU>());
    m->append(std::make_shared<nn::Linear>(16, d.classes, rng));
    return m;
  }));
}

api::RunConfig config(int workers, int64_t batch) {
  api::RunConfig c;
  c.train.model = "tiny-user-net";
  c.train.workers = workers;
  c.train.batchSize = batch;
  c.train.maxSteps = 30;
  c.train.epochs = 100;
  c.train.lr = 0.1;
  c.train.progress = runtime::TrainConfig::Progress::Off;
  return c;
}

}  // namespace

TEST(TrainApi, UserModelOnArraysLearnsUnderOneAndTwoWorkers) {
  registerTiny();
  api::Data d;
  d.train = blobs(600, 1);
  d.test = blobs(300, 2);
  const auto one = api::train(config(1, 32), d);
  const auto two = api::train(config(2, 16), d);
  EXPECT_EQ(one.at("model"), "tiny-user-net");
  EXPECT_EQ(one.at("dataset"), "memory");
  EXPECT_EQ(two.at("strategy"), "allreduce");
  EXPECT_GT(one.at("test_accuracy").get<double>(), 0.9);
  // The global-batch rule: 2 workers x 16 trains the same model as 1 x 32.
  EXPECT_NEAR(one.at("train_loss").get<double>(), two.at("train_loss").get<double>(), 1e-4);
  EXPECT_EQ(one.at("config").at("training").at("batch_size"), 32);
}

// NaN in data handed over in memory: the NaN loss says it came from the input.
TEST(TrainApi, NanLossFromTheInputSaysSo) {
  registerTiny();
  Tensor x = Tensor::zeros({64, 3});
  x.data<float>()[3 * 10 + 2] = NAN;
  Tensor y = Tensor::zeros({64}, DType::I32);
  api::Data d;
  d.train = std::make_shared<data::TensorDataset>(x, y, 3);
  try {
    api::train(config(1, 32), d);
    FAIL() << "trained on NaN";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("from its input: the batch's sample"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("holds NaN at feature 2"), std::string::npos) << e.what();
  }
}

// A registered Sequential is cut into pipeline stages like the built-ins.
TEST(TrainApi, UserSequentialRunsAsAPipeline) {
  registerTiny();
  api::Data d;
  d.train = blobs(600, 1);
  d.test = blobs(300, 2);
  api::RunConfig c = config(1, 32);
  const auto one = api::train(c, d);
  c.train.pipelineStages = 2;
  c.train.microBatches = 2;
  const auto piped = api::train(c, d);
  EXPECT_EQ(piped.at("strategy"), "pipeline");
  EXPECT_NEAR(one.at("train_loss").get<double>(), piped.at("train_loss").get<double>(), 1e-4);
}

TEST(TrainApi, OptionsSetInCodeThatTheRunIgnoresAreRefused) {
  registerTiny();
  api::Data d;
  d.train = blobs(100, 1);
  api::RunConfig c = config(1, 32);
  c.train.gamma = 0.5;  // only --schedule step reads it
  try {
    api::train(c, d);
    FAIL() << "gamma without the step schedule was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--gamma applies to --schedule step");
  }
  c = config(1, 0);
  EXPECT_THROW(api::train(c, d), UsageError);  // batch 0: the schema's range
}

TEST(TrainApi, RegisteringATakenNameIsAnError) {
  registerTiny();
  EXPECT_THROW(nn::registerModel("mlp", nn::classifier(nullptr)), UsageError);
  EXPECT_THROW(nn::registerModel("tiny-user-net", nn::classifier(nullptr)), UsageError);
}
