// --sync-bn (torch.nn.SyncBatchNorm): 2 replicas of batch B normalize by the
// statistics of both batches, so they train as 1 worker of batch 2B does (the
// global-batch rule gives the union of their samples): the same parameters and
// running statistics. Without it each replica normalizes by its own batch,
// which the same comparison tells apart.
//
// One step, B = 16: the runs differ by float summation order (~1e-7), but a
// ResNet with BatchNorm on small batches amplifies that fast (a ReLU input
// within rounding of zero lands on the other side; BatchNorm spreads it over
// the batch): 3 steps at lr 0.05 already differ by ~4e-4, against ~6e-3
// without --sync-bn. BatchNorm biases are compared as a group with a looser
// bound: their gradients are sums of gradients that nearly cancel.
#include <gtest/gtest.h>

#include "ParallelTestUtil.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// Parameters and BatchNorm buffers (float ones; num_batches_tracked as a float).
Params parametersAndBuffers(nn::Module& m) {
  Params p = snapshot(m);
  for (auto& [name, t] : m.namedBuffers())
    p[name] = t->dtype() == DType::F32 ? t->contiguous().toVector()
                                       : std::vector<float>{static_cast<float>(*t->data<int64_t>())};
  return p;
}

runtime::TrainConfig resnetConfig(int64_t batch) {
  runtime::TrainConfig c = smallConfig("resnet-20", batch);
  c.syntheticSize = 64;
  c.maxSteps = 1;
  c.lr = 0.05;
  return c;
}

std::vector<Params> twoReplicas(bool syncBn) {
  const runtime::TrainConfig c = resnetConfig(16);
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  std::vector<Params> out(2);
  parallel::DataParallelOptions o;
  o.syncBn = syncBn;
  comm::local::runLocal(2, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, std::make_unique<parallel::DataParallel>(comm, o));
    t.setData(train, test);
    t.run();
    out[comm.rank()] = parametersAndBuffers(t.model());
  });
  return out;
}

double relativeDistance(const Params& a, const Params& ref, const char* only = "") {
  double diff = 0, norm = 0;
  for (const auto& [name, r] : ref)
    if (name.find(only) != std::string::npos)
    for (size_t i = 0; i < r.size(); ++i) {
      diff += (static_cast<double>(a.at(name)[i]) - r[i]) * (static_cast<double>(a.at(name)[i]) - r[i]);
      norm += static_cast<double>(r[i]) * r[i];
    }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST(SyncBatchNorm, TwoReplicasOfBEqualOneWorkerOf2B) {
  runtime::TrainConfig one = resnetConfig(32);
  runtime::Trainer single(one, std::make_unique<parallel::SingleProcess>());
  single.run();
  const Params ref = parametersAndBuffers(single.model());
  const auto synced = twoReplicas(true);
  for (int r = 0; r < 2; ++r) {
    const std::string what = "sync-bn rank " + std::to_string(r);
    EXPECT_LE(relativeDistance(synced[r], ref), 1e-5) << what;
    EXPECT_LE(relativeDistance(synced[r], ref, "weight"), 1e-5) << what;
    EXPECT_LE(relativeDistance(synced[r], ref, "running_mean"), 1e-5) << what;
    EXPECT_LE(relativeDistance(synced[r], ref, "running_var"), 1e-5) << what;
    EXPECT_LE(relativeDistance(synced[r], ref, "bias"), 1e-4) << what;
    EXPECT_EQ(synced[r].at("bn1.num_batches_tracked"), ref.at("bn1.num_batches_tracked"));
  }
  // Without it: rank 0's running statistics are its own batch's, and the
  // gradients differ from the large batch's.
  const auto own = twoReplicas(false);
  EXPECT_GT(relativeDistance(own[0], ref), 1e-3);
}
