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
#include "runtime/Trainer.h"

namespace dtrain::test {

using Params = std::map<std::string, std::vector<float>>;

// SGD with momentum and weight decay on a small synthetic task; 50 steps over
// several epochs of 1000 samples, so epoch ends (and their dropped remainders,
// e.g. 1000 mod 48 with 3 workers of 16) are crossed too. lr 0.01: the runs
// differ only by float summation order (a batch split in N parts), ~1e-9
// relative after one step, but a rounding difference can flip a discrete choice
// (a max-pool argmax, a ReLU at 0) and jump the difference to ~1e-5 within 50
// steps at lr 0.05 (seen for lenet N = 2); at lr 0.01 the worst case over the
// matrix is ~1e-6 in the Release build the suite runs in. The property is
// chaotic in f32, not exact: a Debug/sanitizer build (other rounding, no FMA
// contraction) flips such a decision for lenet N = 3 and ends ~1e-4 apart, and
// so may a change of kernels. A flip shows as every tensor of one case
// differing at once; a real bug shows from the first steps (check with fewer
// --max-steps).
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

// ||a - b|| / ||b|| per tensor.
inline void expectClose(const Params& a, const Params& ref, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), ref.size()) << what;
  for (const auto& [name, r] : ref) {
    const auto& x = a.at(name);
    ASSERT_EQ(x.size(), r.size()) << what << " " << name;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      ASSERT_TRUE(std::isfinite(x[i])) << what << " " << name;
      diff += (static_cast<double>(x[i]) - r[i]) * (static_cast<double>(x[i]) - r[i]);
      norm += static_cast<double>(r[i]) * r[i];
    }
    EXPECT_LE(std::sqrt(diff), tol * std::sqrt(norm))
        << what << ": " << name << " differs, relative " << std::sqrt(diff / norm);
  }
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
