#pragma once
// A client's local training (FedAvg's ClientUpdate): start from the global model, run
// E epochs of minibatch SGD (or the configured client optimizer, fresh each round) over
// the client's samples in batches of B (B = 0: one batch of all of them), optionally
// with FedProx's proximal term, and return the model delta. One LocalTrainer per worker
// thread: it owns one model and one optimizer and trains the clients given to it one
// after another, so memory holds a model per worker, not per client.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "data/Dataset.h"
#include "federated/FederatedOptions.h"
#include "nn/Module.h"
#include "optim/Optimizer.h"
#include "runtime/Task.h"
#include "runtime/TrainConfig.h"

namespace dtrain::federated {

// The parameters of a model as one flat vector (registration order), and back.
int64_t flatSize(const nn::Module& model);
void readFlat(const nn::Module& model, std::span<float> out);
void writeFlat(nn::Module& model, std::span<const float> in);

struct ClientJob {
  const std::vector<int64_t>* indices = nullptr;  // the client's samples
  uint64_t seed = 0;                              // its shuffles this round
  bool flipLabels = false;                        // label-flip attacker
};

struct ClientResult {
  std::vector<float> delta;  // local - global
  double meanLoss = 0;       // over the local steps
  int64_t steps = 0;
};

class LocalTrainer {
 public:
  LocalTrainer(const runtime::TrainConfig& config, const FederatedOptions& options,
               runtime::Task& task, std::shared_ptr<const data::Dataset> train);
  void train(std::span<const float> global, const ClientJob& job, ClientResult& out);

 private:
  const FederatedOptions& options_;
  runtime::Task& task_;
  std::shared_ptr<const data::Dataset> train_;
  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  data::Batch batch_;
};

}  // namespace dtrain::federated
