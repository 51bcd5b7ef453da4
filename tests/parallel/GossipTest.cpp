// Decentralized (gossip) SGD (parallel/gossip/): the graphs, one round against
// a hand computation (the ranks' mean kept), the complete graph every step is
// allreduce data parallelism up to summation order, a resume is bitwise, the
// mpi backend ends where threads do, the refusals.
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>

#include "cli/CliRunner.h"
#include "nn/Layers.h"
#include "optim/Sgd.h"
#include "parallel/ParallelTestUtil.h"
#include "parallel/gossip/Gossip.h"
#include "parallel/gossip/Topology.h"

namespace dtrain::test {
namespace {

using parallel::gossip::Gossip;
using parallel::gossip::GossipOptions;
using parallel::gossip::neighbours;

TEST(GossipTopology, GraphsAreTheDocumentedOnes) {
  EXPECT_EQ(neighbours("ring", 0, 4), (std::vector<int>{1, 3}));
  EXPECT_EQ(neighbours("ring", 1, 2), (std::vector<int>{0}));
  EXPECT_EQ(neighbours("complete", 2, 4), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(neighbours("exponential", 0, 8), (std::vector<int>{1, 2, 4, 6, 7}));
  EXPECT_EQ(parallel::gossip::torusShape(8), (std::pair<int, int>{2, 4}));
  EXPECT_EQ(neighbours("torus", 5, 8), (std::vector<int>{1, 4, 6}));  // row 1 col 1 of 2 x 4
  // Every graph is regular and symmetric: uniform weights keep the mean.
  for (const std::string g : parallel::gossip::topologyNames())
    for (int n : {2, 3, 5, 8, 12}) {
      const size_t degree = neighbours(g, 0, n).size();
      for (int r = 0; r < n; ++r) {
        const auto peers = neighbours(g, r, n);
        EXPECT_EQ(peers.size(), degree) << g << " n=" << n << " rank " << r;
        for (int j : peers) {
          const auto back = neighbours(g, j, n);
          EXPECT_TRUE(std::find(back.begin(), back.end(), r) != back.end()) << g << " " << r << "-" << j;
        }
      }
    }
  EXPECT_THROW(neighbours("star", 0, 4), UsageError);
}

// Four ranks on a ring, each holding a one-parameter model of value 10 r:
// after one round rank r holds the mean of itself and its two neighbours.
TEST(Gossip, OneRoundAveragesWithTheNeighbours) {
  std::vector<float> after(4);
  comm::local::runLocal(4, [&](comm::Communicator& comm) {
    Rng rng(3);
    nn::Linear layer(1, 1, rng, /*bias=*/false);
    optim::Sgd opt(layer.namedParameters(), optim::SgdOptions{});
    GossipOptions o;
    o.topology = "ring";
    Gossip g(comm, o);
    g.setup(layer, opt);  // broadcasts rank 0's model: set ours after
    layer.namedParameters()[0].second.data().data<float>()[0] = 10.0f * comm.rank();
    g.round();
    after[comm.rank()] = layer.namedParameters()[0].second.data().data<float>()[0];
  });
  EXPECT_FLOAT_EQ(after[0], (30 + 0 + 10) / 3.0f);
  EXPECT_FLOAT_EQ(after[1], (0 + 10 + 20) / 3.0f);
  EXPECT_FLOAT_EQ(after[2], (10 + 20 + 30) / 3.0f);
  EXPECT_FLOAT_EQ(after[3], (20 + 30 + 0) / 3.0f);
  EXPECT_NEAR(std::accumulate(after.begin(), after.end(), 0.0), 60.0, 1e-4);  // the mean is kept
}

std::vector<Params> runGossip(const runtime::TrainConfig& c, int workers, GossipOptions o) {
  auto train = runtime::loadDataset(c, true);
  auto test = runtime::loadDataset(c, false);
  std::vector<Params> out(workers);
  comm::local::runLocal(workers, [&](comm::Communicator& comm) {
    runtime::Trainer t(c, std::make_unique<Gossip>(comm, o));
    t.setData(train, test);
    t.run();
    out[comm.rank()] = snapshot(t.model());
  });
  return out;
}

// The complete graph every step with SGD + momentum + weight decay (linear in
// the gradient): every rank's model is the mean after each step, as allreduce's.
TEST(Gossip, CompleteGraphEveryStepEqualsAllreduce) {
  for (const std::string model : {"mlp", "lenet"}) {
    const auto c = smallConfig(model, 16);
    GossipOptions o;
    o.topology = "complete";
    auto gossip = runGossip(c, 3, o);
    expectClose(gossip[0], runDataParallel(c, 3)[0], 1e-5, model + " gossip complete vs allreduce");
    for (int r = 1; r < 3; ++r) EXPECT_EQ(gossip[r], gossip[0]) << model << ": rank " << r << " differs";
  }
}

const std::string kGossipRun = std::string(DTRAIN_BIN) +
                               " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 "
                               "--batch-size 16 --seed 5 --progress off --strategy gossip --lr 0.05 ";

nlohmann::json gossipOk(const std::string& command) {
  auto r = runShell(command);
  EXPECT_EQ(r.code, 0) << command << "\n" << r.err;
  std::string last = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  return nlohmann::json::parse(last.substr(last.rfind('\n') + 1), nullptr, false);
}

// A ring of 4, a round every 2 steps: a checkpoint at step 5 (between rounds,
// the ranks' models differ) resumes to the straight run's end bitwise.
TEST(Gossip, ResumeIsBitwise) {
  const std::string dir = tempDir(), ckpt = dir + "/ckpt";
  const std::string run = kGossipRun + "--workers 4 --topology ring --gossip-every 2 ";
  auto line = gossipOk(run + "--max-steps 12 --save " + dir + "/straight.safetensors");
  EXPECT_EQ(line.value("gossip_rounds", 0.0), 6);
  EXPECT_EQ(line.value("gossip_degree", 0.0), 2);
  EXPECT_EQ(line.value("topology", ""), "ring");
  EXPECT_GT(line.value("consensus_distance", 0.0), 0);  // a ring of 4 is not the complete graph
  gossipOk(run + "--max-steps 8 --checkpoint-every 5 --checkpoint-dir " + ckpt);
  bool perRank = false;
  for (auto& [name, t] : runtime::loadSafetensors(ckpt + "/step-000000005.safetensors").tensors)
    perRank |= name == "strategy.rank3.gossip.model.1.weight";
  EXPECT_TRUE(perRank) << "no rank 3 model in the checkpoint";
  gossipOk(run + "--max-steps 12 --resume " + ckpt + "/step-000000005.safetensors --save " + dir +
           "/resumed.safetensors");
  const auto straight = loadCheckpointTensors(dir + "/straight.safetensors");
  const auto resumed = loadCheckpointTensors(dir + "/resumed.safetensors");
  ASSERT_EQ(straight.size(), resumed.size());
  for (const auto& [name, v] : straight) EXPECT_EQ(resumed.at(name), v) << name << " differs";
  std::filesystem::remove_all(dir);
}

// A ring of 4 every step trains the mlp on Fashion-MNIST (chance is 0.1).
TEST(Gossip, TrainsTheMlpOnFashionMnist) {
  auto line = gossipOk(std::string(DTRAIN_BIN) + " train --model mlp --workers 4 --strategy gossip "
                       "--topology ring --batch-size 32 --max-steps 300 --lr 0.1 --progress off");
  EXPECT_GT(line.value("test_accuracy", 0.0), 0.75) << line.dump();
  EXPECT_GT(line.value("bytes_sent_total", 0.0), 0);
}

TEST(Gossip, UsageErrors) {
  const std::string quick = "train --dataset synthetic --synthetic-size 256 --max-steps 2 --progress off --workers 2 ";
  expectError(runDtrain(quick + "--strategy gossip --gossip-every 0"), 2, "--gossip-every");
  expectError(runDtrain(quick + "--strategy gossip --topology star"), 2, "--topology");
  expectError(runDtrain(quick + "--topology ring"), 2, "--topology does not apply to --strategy allreduce");
  expectError(runDtrain(quick + "--strategy gossip --zero 1"), 2, "--zero applies to the allreduce strategy");
  expectError(runDtrain(quick + "--strategy gossip --pipeline-stages 2"), 2, "drop --strategy gossip");
}

#ifdef DTRAIN_MPIEXEC
// The mpi backend: 4 processes on an exponential graph end where 4 threads do.
TEST(Gossip, MpiMatchesLocalThreads) {
  const std::string dir = tempDir();
  const std::string args = " train --model mlp --dataset synthetic --synthetic-size 512 --epochs 1000 "
                           "--batch-size 16 --seed 5 --progress off --strategy gossip --topology exponential "
                           "--lr 0.05 --max-steps 10 ";
  gossipOk(mpirun(4) + args + "--backend mpi --save " + dir + "/mpi.safetensors");
  gossipOk(std::string(DTRAIN_BIN) + args + "--workers 4 --save " + dir + "/local.safetensors");
  expectClose(loadModelParams(dir + "/mpi.safetensors"), loadModelParams(dir + "/local.safetensors"), 1e-5,
              "mpi vs local");
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace dtrain::test
