#pragma once
// Helpers of the data-parallel tests: small synthetic runs through the Trainer
// API (local backend, in-process) and per-tensor relative comparisons.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "comm/local/Local.h"
#include "parallel/allreduce/DataParallel.h"
#include "runtime/Safetensors.h"
#include "runtime/Trainer.h"

namespace dtrain::test {

// `args` without a "--fusion-mb X" flag: for the strategies that read no
// [allreduce] options (one process, parameter servers, Hogwild!), where
// giving it is an error.
inline std::string withoutFusion(std::string args) {
  const auto at = args.find("--fusion-mb ");
  if (at == std::string::npos) return args;
  const auto end = args.find(' ', at + 12);
  return args.erase(at, end == std::string::npos ? std::string::npos : end + 1 - at);
}

using Params = std::map<std::string, std::vector<float>>;

// SGD with momentum and weight decay on a small synthetic task; 50 steps over
// several epochs of 1000 samples, so epoch ends (and their dropped remainders,
// e.g. 1000 mod 48 with 3 workers of 16) are crossed too. lr 0.01: the runs
// differ only by float summation order (a batch split in N parts), ~1e-9
// relative after one step, until a rounding difference flips a discrete choice
// (see expectClose for what that does and how the comparison tolerates it).
inline runtime::TrainConfig smallConfig(const std::string& model, int64_t batch) {
  runtime::TrainConfig c;
  c.model = model;
  c.dataset = "synthetic";
  c.syntheticSize = 1000;
  c.epochs = 1000;
  c.maxSteps = 50;
  c.batchSize = batch;
  c.lr = 0.01;
  c.momentum = 0.9;
  c.weightDecay = 5e-4;
  c.seed = 7;
  c.progress = runtime::TrainConfig::Progress::Off;
  c.prefetch = 1;
  c.logEvery = 25;
  c.evalBatch = 1000;
  return c;
}

// The model's tensors of a checkpoint file (not the optimizer's or the
// strategy's state: keys under "optimizer." and "strategy.").
inline Params loadModelParams(const std::string& path) {
  Params p;
  for (auto& [name, t] : runtime::loadSafetensors(path).tensors)
    if (name.rfind("optimizer.", 0) != 0 && name.rfind("strategy.", 0) != 0)
      p[name] = t.contiguous().toVector();
  return p;
}

// Every tensor of a checkpoint but the strategy's: the model and the optimizer
// state (integer step counts as one float each).
inline Params loadCheckpointTensors(const std::string& path) {
  Params p;
  for (auto& [name, t] : runtime::loadSafetensors(path).tensors)
    if (name.rfind("strategy.", 0) != 0)
      p[name] = t.dtype() == DType::F32
                    ? t.contiguous().toVector()
                    : std::vector<float>{static_cast<float>(*t.contiguous().data<int64_t>())};
  return p;
}

inline Params snapshot(nn::Module& m) {
  Params p;
  for (auto& [name, v] : m.namedParameters()) p[name] = v.data().contiguous().toVector();
  return p;
}

inline Params runSingle(const runtime::TrainConfig& c) {
  runtime::Trainer t(c, std::make_unique<parallel::SingleProcess>());
  t.run();
  return snapshot(t.model());
}

// Every rank's final parameters.
inline std::vector<Params> runDataParallel(const runtime::TrainConfig& c, int workers,
                                           parallel::DataParallelOptions o = {}) {
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  std::vector<Params> out(workers);
  comm::local::runLocal(workers, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, std::make_unique<parallel::DataParallel>(comm, o));
    t.setData(train, test);
    t.run();
    out[comm.rank()] = snapshot(t.model());
  });
  return out;
}

// Relative difference of two runs' parameters: the whole parameter vector
// within `tol` (||a - ref|| / ||ref|| over every tensor together) and each
// tensor within 100 x tol.
//
// Why two levels: the runs compared (N workers vs 1, parameter servers vs
// allreduce) differ only by float summation order, ~1e-8 relative per step,
// until a rounding difference flips a discrete choice (a max-pool argmax, a
// ReLU at 0): then one small tensor (a bias of a few dozen values) jumps to
// 1e-5..1e-4 relative within 20-50 steps (seen for lenet with N = 4 and the
// tree and hier algorithms on an AMD EPYC; which case flips depends on the
// machine's kernels), while the whole vector stays ~1e-7. A real bug (a
// missed average, a stale or missing bucket, a wrong shard) moves whole
// tensors by 1e-3 or more.
inline void expectClose(const Params& a, const Params& ref, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), ref.size()) << what;
  double diffAll = 0, normAll = 0;
  for (const auto& [name, r] : ref) {
    const auto& x = a.at(name);
    ASSERT_EQ(x.size(), r.size()) << what << " " << name;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      ASSERT_TRUE(std::isfinite(x[i])) << what << " " << name;
      diff += (static_cast<double>(x[i]) - r[i]) * (static_cast<double>(x[i]) - r[i]);
      norm += static_cast<double>(r[i]) * r[i];
    }
    EXPECT_LE(std::sqrt(diff), 100 * tol * std::sqrt(norm))
        << what << ": " << name << " differs, relative " << std::sqrt(diff / norm);
    diffAll += diff;
    normAll += norm;
  }
  EXPECT_LE(std::sqrt(diffAll), tol * std::sqrt(normAll))
      << what << ": the parameters differ, relative " << std::sqrt(diffAll / normAll);
}

#ifdef DTRAIN_MPIEXEC
// `mpirun -np n dtrain` as root, oversubscribed (more ranks than cores), with a
// one-minute communication timeout.
inline std::string mpirun(int n) {
  return std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                     "OMPI_MCA_rmaps_base_oversubscribe=1 DTRAIN_COMM_TIMEOUT_MS=60000 ") +
         DTRAIN_MPIEXEC + " --oversubscribe -np " + std::to_string(n) + " " + DTRAIN_BIN;
}
#endif

}  // namespace dtrain::test
