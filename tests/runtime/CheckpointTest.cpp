#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/Rng.h"
#include "optim/Factory.h"
#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"
#include "runtime/TestUtil.h"

using namespace dtrain;
using namespace dtrain::runtime;
using autograd::Variable;
using dtrain::testing::readBytes;
using dtrain::testing::TempDir;

namespace {

Tensor randn(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = rng.normal();
  return t;
}

// Test stand-ins for the real layers (which live in nn/): only names, shapes
// and buffers matter to checkpoints.
class Affine : public nn::Module {
 public:
  Affine(int64_t in, int64_t out, Rng& rng) {
    registerParameter("weight", randn({out, in}, rng));
    registerParameter("bias", randn({out}, rng));
  }
  Variable forward(const Variable& x) override { return x; }
  std::string describe() const override { return "Affine"; }
};

class Norm : public nn::Module {
 public:
  Norm(int64_t c, Rng& rng) {
    registerParameter("weight", randn({c}, rng));
    registerParameter("bias", randn({c}, rng));
    registerBuffer("running_mean", randn({c}, rng));
    Tensor count = Tensor::zeros({}, DType::I64);
    *count.data<int64_t>() = static_cast<int64_t>(rng.below(1000));
    registerBuffer("num_batches_tracked", count);
  }
  Variable forward(const Variable& x) override { return x; }
  std::string describe() const override { return "Norm"; }
};

class Act : public nn::Module {
 public:
  Variable forward(const Variable& x) override { return x; }
  std::string describe() const override { return "Act"; }
};

// Like nn.Sequential(Affine(4, hidden), Act(), Norm(hidden), Affine(hidden, 2)[, Affine(2, 2)]):
// names "0.weight", "0.bias", "2.weight", "2.running_mean", "3.weight", ...
class Net : public nn::Module {
 public:
  explicit Net(uint64_t seed, int64_t hidden = 3, bool extraLayer = false) {
    Rng rng(seed);
    registerModule("0", std::make_shared<Affine>(4, hidden, rng));
    registerModule("1", std::make_shared<Act>());
    registerModule("2", std::make_shared<Norm>(hidden, rng));
    registerModule("3", std::make_shared<Affine>(hidden, 2, rng));
    if (extraLayer) registerModule("4", std::make_shared<Affine>(2, 2, rng));
  }
  Variable forward(const Variable& x) override { return x; }
  std::string describe() const override { return "Net"; }
};

std::string bytesOf(const Tensor& t) {
  return std::string(static_cast<const char*>(t.rawData()), t.nbytes());
}

// Every tensor of the model and optimizer, by name, as raw bytes.
std::map<std::string, std::string> snapshot(nn::Module& m, optim::Optimizer* opt) {
  std::map<std::string, std::string> out;
  for (auto& [n, v] : m.namedParameters()) out[n] = bytesOf(v.data());
  for (auto& [n, t] : m.namedBuffers()) out[n] = bytesOf(*t);
  if (opt)
    for (auto& [n, t] : opt->namedState()) out["optimizer." + n] = bytesOf(*t);
  return out;
}

void setGrads(nn::Module& m, Rng& rng) {
  for (auto& [n, v] : m.namedParameters()) v.grad() = randn(v.shape(), rng);
}

std::unique_ptr<optim::Optimizer> makeOpt(const std::string& name, nn::Module& m) {
  optim::OptimizerOptions o;
  o.lr = 0.01;
  if (name == "sgd") o.momentum = 0.9;
  return optim::makeOptimizer(name, m.namedParameters(), o);
}

std::string loadError(const std::string& path, nn::Module& m, optim::Optimizer* opt,
                      TrainState* st = nullptr) {
  try {
    loadCheckpoint(path, m, opt, st);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Checkpoint, RoundTripIntoAFreshModelAndOptimizerIsBitwiseExact) {
  TempDir dir;
  for (const std::string name : {"sgd", "adam", "adamw", "adagrad", "lars", "lamb"}) {
    SCOPED_TRACE(name);
    const std::string path = dir.file(name + ".safetensors");
    Net a(1);
    auto optA = makeOpt(name, a);
    Rng grads(7);
    for (int s = 0; s < 3; ++s) {
      setGrads(a, grads);
      optA->step();
    }
    TrainState st;
    st.step = 3;
    st.epoch = 1;
    Rng trainerRng(99);
    trainerRng.next();
    st.rng = trainerRng.state();
    st.metadata = {{"model", "net"}, {"config", "{\"lr\": 0.01}"}};
    saveCheckpoint(path, a, optA.get(), st);

    Net b(2);  // different initial values
    auto optB = makeOpt(name, b);
    ASSERT_NE(snapshot(a, nullptr), snapshot(b, nullptr));
    TrainState loaded;
    CheckpointInfo info = loadCheckpoint(path, b, optB.get(), &loaded);
    EXPECT_TRUE(info.hasTrainState);
    EXPECT_TRUE(info.hasOptimizerState);
    EXPECT_EQ(info.optimizerName, name);
    EXPECT_EQ(snapshot(a, optA.get()), snapshot(b, optB.get()));
    EXPECT_EQ(optB->stepCount(), 3);
    EXPECT_EQ(loaded.step, 3);
    EXPECT_EQ(loaded.epoch, 1);
    EXPECT_EQ(loaded.rng, st.rng);
    EXPECT_EQ(loaded.metadata, st.metadata);

    // Training continues identically from the restored state.
    Rng g1(11), g2(11);
    setGrads(a, g1);
    setGrads(b, g2);
    optA->step();
    optB->step();
    EXPECT_EQ(snapshot(a, optA.get()), snapshot(b, optB.get()));
  }
}

TEST(Checkpoint, ModelTensorsUseExactlyTheModuleNames) {
  TempDir dir;
  const std::string path = dir.file("names.safetensors");
  Net a(1);
  auto opt = makeOpt("adam", a);
  opt->ensureState();
  saveCheckpoint(path, a, opt.get(), {});
  auto f = loadSafetensors(path);
  std::set<std::string> names;
  for (const auto& [n, t] : f.tensors) names.insert(n);
  for (const char* n : {"0.weight", "0.bias", "2.weight", "2.bias", "2.running_mean",
                        "2.num_batches_tracked", "3.weight", "3.bias", "optimizer.0.weight.step",
                        "optimizer.0.weight.exp_avg", "optimizer.3.bias.exp_avg_sq"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(names.size(), 8u + 6u * 3u);  // 6 parameters + 2 buffers, 3 state tensors per parameter
  EXPECT_EQ(f.find("2.num_batches_tracked")->dtype(), DType::I64);
  EXPECT_EQ(f.metadata.at("dtrain.optimizer"), "adam");
  EXPECT_EQ(f.metadata.at("dtrain.step"), "0");
}

TEST(Checkpoint, ShapeMismatchNamesTheParameterAndBothShapes) {
  TempDir dir;
  const std::string path = dir.file("small.safetensors");
  Net small(1, 3);
  saveCheckpoint(path, small, nullptr, {});
  Net big(2, 5);
  const auto before = snapshot(big, nullptr);
  const std::string err = loadError(path, big, nullptr);
  EXPECT_NE(err.find("checkpoint " + path + ": parameter 0.weight has shape [3, 4], model expects [5, 4]"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("buffer 2.running_mean has shape [3], model expects [5]"), std::string::npos) << err;
  EXPECT_EQ(snapshot(big, nullptr), before);  // nothing half-loaded
}

TEST(Checkpoint, MissingAndUnexpectedTensorsAreErrors) {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  Net plain(1);
  saveCheckpoint(path, plain, nullptr, {});
  Net deeper(2, 3, /*extraLayer=*/true);
  const auto before = snapshot(deeper, nullptr);
  std::string err = loadError(path, deeper, nullptr);
  EXPECT_NE(err.find("checkpoint " + path + ": missing parameter 4.weight; missing parameter 4.bias"),
            std::string::npos)
      << err;
  EXPECT_EQ(snapshot(deeper, nullptr), before);

  saveCheckpoint(path, deeper, nullptr, {});
  err = loadError(path, plain, nullptr);
  EXPECT_NE(err.find("unexpected tensor 4.weight"), std::string::npos) << err;
}

TEST(Checkpoint, DtypeMismatchIsAnError) {
  TempDir dir;
  const std::string path = dir.file("d.safetensors");
  Net a(1);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [n, v] : a.namedParameters()) tensors.emplace_back(n, v.data());
  tensors.emplace_back("2.running_mean", Tensor::zeros({3}));
  tensors.emplace_back("2.num_batches_tracked", Tensor::zeros({}));  // F32 instead of I64
  saveSafetensors(path, tensors);
  const std::string err = loadError(path, a, nullptr);
  EXPECT_NE(err.find("buffer 2.num_batches_tracked has dtype F32, model expects I64"), std::string::npos)
      << err;
}

TEST(Checkpoint, BareStateDictLoadsWithFreshOptimizer) {
  // What torch.save_file(model.state_dict()) or scripts/torch_interop.py write:
  // model tensors only, no metadata.
  TempDir dir;
  const std::string path = dir.file("torch.safetensors");
  Net a(1);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [n, v] : a.namedParameters()) tensors.emplace_back(n, v.data());
  for (auto& [n, t] : a.namedBuffers()) tensors.emplace_back(n, *t);
  saveSafetensors(path, tensors);

  Net b(2);
  auto opt = makeOpt("adam", b);
  Rng g(3);
  setGrads(b, g);
  opt->step();  // stale state that the load must clear
  TrainState st;
  st.step = 50;
  st.rng = Rng(5).state();
  CheckpointInfo info = loadCheckpoint(path, b, opt.get(), &st);
  EXPECT_FALSE(info.hasTrainState);
  EXPECT_FALSE(info.hasOptimizerState);
  EXPECT_EQ(snapshot(a, nullptr), snapshot(b, nullptr));
  EXPECT_TRUE(opt->namedState().empty());
  EXPECT_EQ(opt->stepCount(), 0);
  EXPECT_EQ(st.step, 0);
  EXPECT_EQ(st.epoch, 0);
  EXPECT_EQ(st.rng, Rng(5).state());  // the run's seeded RNG is kept
}

TEST(Checkpoint, OptimizerStateMustMatchTheOptimizer) {
  TempDir dir;
  const std::string path = dir.file("o.safetensors");
  Net a(1);
  auto adam = makeOpt("adam", a);
  adam->ensureState();
  saveCheckpoint(path, a, adam.get(), {});

  Net b(2);
  auto sgd = makeOpt("sgd", b);
  const auto before = snapshot(b, sgd.get());
  std::string err = loadError(path, b, sgd.get());
  EXPECT_NE(err.find("checkpoint " + path + ": it holds state of optimizer adam, but this run uses sgd"),
            std::string::npos)
      << err;
  EXPECT_EQ(snapshot(b, sgd.get()), before);

  // Without an optimizer the optimizer keys are ignored (e.g. for evaluation).
  EXPECT_NO_THROW(loadCheckpoint(path, b, nullptr, nullptr));
  EXPECT_EQ(snapshot(a, nullptr), snapshot(b, nullptr));

  // Foreign optimizer keys (no optimizer name in the metadata) are checked one by one.
  auto f = loadSafetensors(path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [n, t] : f.tensors)
    if (n != "optimizer.0.bias.exp_avg") tensors.emplace_back(n, t);
  tensors.emplace_back("optimizer.0.bias.velocity", Tensor::zeros({3}));
  saveSafetensors(path, tensors);
  Net c(3);
  auto adamC = makeOpt("adam", c);
  err = loadError(path, c, adamC.get());
  EXPECT_NE(err.find("missing optimizer state optimizer.0.bias.exp_avg"), std::string::npos) << err;
  EXPECT_NE(err.find("unexpected optimizer state optimizer.0.bias.velocity"), std::string::npos) << err;
  EXPECT_TRUE(adamC->namedState().empty());
}

TEST(Checkpoint, StateOfParametersNeverUpdatedStaysAbsent) {
  TempDir dir;
  const std::string path = dir.file("p.safetensors");
  Net a(1);
  auto opt = makeOpt("sgd", a);
  Rng g(1);
  setGrads(a, g);
  a.namedParameters()[1].second.grad() = Tensor();  // 0.bias gets no gradient
  opt->step();
  saveCheckpoint(path, a, opt.get(), {});
  Net b(2);
  auto optB = makeOpt("sgd", b);
  loadCheckpoint(path, b, optB.get(), nullptr);
  EXPECT_EQ(snapshot(a, opt.get()), snapshot(b, optB.get()));
  EXPECT_FALSE(optB->hasState(1));
  EXPECT_TRUE(optB->hasState(0));
}

TEST(Checkpoint, ReservedMetadataAndCorruptTrainState) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  Net a(1);
  TrainState st;
  st.metadata["dtrain.step"] = "7";
  EXPECT_THROW(saveCheckpoint(path, a, nullptr, st), Error);
  EXPECT_FALSE(std::filesystem::exists(path));

  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [n, v] : a.namedParameters()) tensors.emplace_back(n, v.data());
  for (auto& [n, t] : a.namedBuffers()) tensors.emplace_back(n, *t);
  saveSafetensors(path, tensors, {{"dtrain.step", "seven"}});
  TrainState out;
  std::string err = loadError(path, a, nullptr, &out);
  EXPECT_NE(err.find("metadata dtrain.step = 'seven' is not a non-negative integer"), std::string::npos)
      << err;
  saveSafetensors(path, tensors, {{"dtrain.step", "1"}, {"dtrain.rng", "12,34"}});
  err = loadError(path, a, nullptr, &out);
  EXPECT_NE(err.find("is not 4 comma-separated hex words"), std::string::npos) << err;
}

TEST(Checkpoint, CorruptFileErrorsPassThrough) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  dtrain::testing::writeBytes(path, "nope");
  Net a(1);
  EXPECT_NE(loadError(path, a, nullptr).find("too short"), std::string::npos);
}
