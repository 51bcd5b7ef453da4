#pragma once
// Decentralized SGD (D-PSGD; Lian et al. 2017, "Can Decentralized Algorithms
// Outperform Centralized Algorithms?"): every rank takes optimizer steps on its
// own slice of the global batch and, every `every` steps, averages its
// parameters with its neighbours' on a graph (Topology.h) over point-to-point
// messages: no allreduce of the model and no server. A rank sends its model to
// each neighbour per round, so a round costs degree x model bytes per rank
// whatever the number of ranks; the ranks' models differ by a consensus error
// that the graph's spectral gap bounds.
//
//  - Weights are uniform, 1 / (degree + 1), summed in rank order: on the
//    complete graph every rank computes the same mean, so with every = 1 and
//    plain or momentum SGD (linear in the gradient) it is allreduce data
//    parallelism up to summation order.
//  - Float buffers (BatchNorm's running statistics) are gossiped with the
//    parameters; the optimizer's state stays local.
//  - finish() averages the models over all ranks once, so the model evaluated
//    and saved is the ranks' mean (the x-bar of the analysis).
//  - The logged loss and the stop vote are scalar allreduces, as every
//    strategy's; only the model travels point to point.
//  - Checkpoints hold every rank's parameters and optimizer state
//    ("rank<r>.gossip.*"): a resume with the same ranks is bitwise; with
//    another number of ranks every rank starts from rank 0's model.
#include <map>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/RankState.h"
#include "parallel/Strategy.h"
#include "parallel/gossip/GossipOptions.h"

namespace dtrain::parallel::gossip {

class Gossip final : public Strategy {
 public:
  // `comm` must outlive the strategy.
  Gossip(comm::Communicator& comm, GossipOptions options);

  std::string name() const override { return "gossip"; }
  int rank() const override { return comm_.rank(); }
  int worldSize() const override { return comm_.size(); }
  bool ownsProcess() const override { return std::string(comm_.backend()) != "local"; }

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override { step_ = step; }
  void applyUpdate(optim::Optimizer& optimizer) override;
  double reduceMetric(double localValue) override;
  bool anyRankStops(bool mine) override { return reduceMetric(mine ? 1.0 : 0.0) > 0; }
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;
  std::map<std::string, Tensor> checkpointState() override;
  void loadCheckpointState(const std::map<std::string, Tensor>& saved) override;
  // gossip_rounds, gossip_every, gossip_degree, consensus_distance (the ranks'
  // mean relative distance to their mean at the end, before finish's average),
  // comm_ms (per step), comm_s_total, bytes_sent_total, bytes_sent_per_worker (per step).
  std::map<std::string, double> stats() const override;

  // One round: average with the neighbours now (point to point).
  void round();
  const std::vector<int>& peers() const { return peers_; }

 private:
  void pack(float* out) const;
  void unpack(const float* in);
  NamedState perRankState();
  // Every rank's model replaced by the mean over all ranks (allreduce); returns
  // the ranks' mean relative distance to it before.
  double averageAll();

  comm::Communicator& comm_;
  GossipOptions opts_;
  std::vector<int> peers_;
  nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;
  std::vector<std::pair<std::string, autograd::Variable>> params_;  // trained ones
  std::vector<std::pair<std::string, Tensor*>> tensors_;  // their data, then the float buffers
  int64_t numel_ = 0;
  std::vector<float> mine_, theirs_;  // this rank's packed model, the neighbours' (one after another)
  std::vector<float> mean_;           // a round's sum, then mean
  int64_t step_ = 0, steps_ = 0, rounds_ = 0;
  double commUs_ = 0, consensus_ = 0;
};

}  // namespace dtrain::parallel::gossip
