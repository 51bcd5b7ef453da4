#pragma once
// The coordinator's side of Sandblaster's parameter-server shards
// (ShardProtocol.h): L-BFGS (optim/Lbfgs.h's iteration, step for step) driven
// by commands, with every vector on the shards and only scalars here: the
// two-loop recursion's dot products arrive as per-shard partial sums, added in
// shard order, and its coefficients go back. With one shard the arithmetic is
// Lbfgs::step's exactly (bitwise); with more, the dot products are summed in
// another order.
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "nn/Module.h"
#include "optim/Lbfgs.h"
#include "parallel/sandblaster/ShardProtocol.h"

namespace dtrain::parallel::sandblaster {

class ShardedLbfgs {
 public:
  ShardedLbfgs(comm::Communicator& comm, int servers, int64_t params);

  // Hands each shard its slice of the model's parameters and of a (resumed)
  // history (Lbfgs::globalState's tensors; empty: none).
  void init(nn::Module& model, const std::vector<std::pair<std::string, Tensor>>& history, int capacity);
  // An evaluation: the shards expect its units (evaluation, units, samples);
  // end waits until each has summed them.
  void beginEvaluation(int64_t evaluation, int units, int64_t samples);
  void endEvaluation(int64_t evaluation);
  // One L-BFGS iteration from the gradient of the evaluation just ended
  // (whose loss is lossNow); `evaluate` runs an evaluation at the shards'
  // current parameters and returns its loss (the line search's trials).
  void step(const optim::LbfgsOptions& o, double lossNow, const std::function<double()>& evaluate);
  // The parameters into the model (the trainer evaluates or saves), and the
  // history as Lbfgs::globalState's tensors (checkpoints).
  void gatherParameters(nn::Module& model);
  std::map<std::string, Tensor> gatherHistory();
  void done();

  size_t historySize() const { return ro_.size(); }
  int64_t commands() const { return commands_; }

 private:
  struct Sums {
    double sum0 = 0, max0 = 0, sum1 = 0, max1 = 0;
    int64_t pairs = 0;  // the history length every shard reported
  };
  // Sends one command to every shard and adds up their replies in shard order.
  Sums call(shard::Op op, double a = 0, double b = 0, double c = 0);
  void clearHistory();
  comm::Communicator& comm_;
  int servers_;
  int64_t params_;
  std::deque<double> ro_;  // 1 / y_k.s_k, oldest first (the shards hold s_k, y_k)
  size_t capacity_ = 10;
  double hDiag_ = 1.0;
  int64_t commands_ = 0;
};

}  // namespace dtrain::parallel::sandblaster
