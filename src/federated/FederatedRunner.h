#pragma once
// `dtrain train --strategy fedavg`, simulated in one process (McMahan et al. 2017):
// K clients, each a partition of the training set; every round the server samples
// m = max(C K, 1) of them, sends them the global model, the clients train locally on a
// pool of worker threads (a model per worker, the clients one after another on each),
// and the server aggregates the reported deltas (weighted by n_k, or by a robust rule),
// then applies them through a server optimizer (FedAvg, FedAvgM, FedAdam).
// DP-FedAvg clips every delta and adds Gaussian noise to their sum, with an RDP
// accountant reporting epsilon after every round.
// Federated rounds are not the trainer's step loop, so this is its own runner; it
// reuses the model registry, the tasks (loss, evaluation), the optimizers and the
// metrics and progress writers.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/Communicator.h"
#include "core/Rng.h"
#include "federated/FederatedOptions.h"
#include "federated/LocalTrainer.h"
#include "federated/PrivacyAccountant.h"
#include "federated/WallClockRounds.h"
#include "core/Memory.h"
#include "runtime/Task.h"
#include "runtime/Timeline.h"
#include "runtime/TrainConfig.h"

namespace dtrain::federated {

struct RoundStats {
  int64_t round = 0;  // 1-based
  int selected = 0, reported = 0;
  int late = 0;                        // --round-deadline-s: trained too slowly, left out
  int64_t bytesUp = 0, bytesDown = 0;  // this round: deltas up, global model down (fp32)
  double trainLoss = 0;                // mean of the reporters' local losses
  double seconds = 0;
  std::optional<double> epsilon;       // DP: after this round
};

class FederatedRunner {
 public:
  // `data` members left null are loaded from the config.
  FederatedRunner(runtime::TrainConfig config, FederatedOptions options,
                  runtime::TaskData data = {});
  ~FederatedRunner();

  // --backend mpi: every rank runs this runner; rank 0 serves (hosts no
  // clients, writes metrics and progress), ranks 1..P-1 train the round's
  // reporters round-robin. On the simulated clock an allgatherv gives every rank
  // every update, so each applies the same aggregate (identical global models,
  // no broadcast); on the wall clock the server sends the model and waits for
  // the updates until the deadline (WallClockRounds.h), and the hosts' run()
  // serves rounds until the server's last.
  // Call before the first round; comm must have at least 2 ranks.
  void setCommunicator(comm::Communicator* comm);

  // --timeline: the rounds' spans go here (this rank's; written by run()). Null: none.
  // --load: the global model starts from that checkpoint (its weights only);
  // --save: run() writes the final global model as a checkpoint any run can --load.

  // One round (1-based numbers, in order).
  RoundStats runRound(int64_t round);
  // Every round with metrics, progress and evaluations; the final JSON line's fields.
  nlohmann::json run();

  nn::Module& globalModel() { return *server_; }
  nlohmann::json evaluate() { return task_->evaluate(*server_); }
  const std::vector<std::vector<int64_t>>& clientSamples() const { return clients_; }
  const std::vector<char>& attackers() const { return malicious_; }

 private:
  std::vector<int> selectClients(Rng& rng) const;
  // The round's selected clients and, of those, the ones that report (dropout);
  // the same on every rank (drawn from the seed and the round).
  void drawRound(int64_t round, Rng& rng, std::vector<int>& selected,
                 std::vector<int>& reporters) const;
  // Local training of reporter i (and its attack, if malicious) into out.
  void trainClient(LocalTrainer& trainer, int64_t round, int client, ClientResult& out);
  // --deadline-clock wall, ranks 1..P-1: train the clients the server sends, until it stops.
  void serveAsHost();
  // The round's reporters trained on this process's worker threads (those it hosts).
  void trainHere(int64_t round, const std::vector<int>& reporters, std::vector<ClientResult>& results);
  // Aggregation (plain, robust, DP or secure) and the server optimizer's step.
  void aggregateAndApply(int64_t round, const std::vector<int>& selected,
                         const std::vector<int>& reporters, std::vector<ClientResult>& results,
                         Rng& rng, RoundStats& s);
  bool wallClock() const { return comm_ && options_.deadlineClock == "wall"; }
  void aggregate(std::vector<ClientResult>& results, const std::vector<int>& reporters,
                 Rng& rng, std::span<float> out);
  // --secure-aggregation: the weighted mean into update_ through the protocol;
  // false when too few clients reported to unmask (the round is skipped).
  bool secureMean(const std::vector<int>& selected, const std::vector<int>& reporters,
                  const std::vector<ClientResult>& results, int64_t round, RoundStats& s);

  // memory_per_rank: this process's (rank's) allocations, the worker threads' included.
  memory::Domain* memoryDomain_ = memory::newDomain();
  memory::DomainScope memoryScope_{memoryDomain_};
  runtime::TrainConfig config_;
  FederatedOptions options_;
  std::function<void(const nlohmann::json&)> onMetrics_;  // TaskData's (Python's on_metrics)
  // --timeline: a rank's server-side spans (round, aggregate) on its compute lane,
  // each worker thread's client training on a lane of its own.
  runtime::Timeline timeline_;
  parallel::SpanRecorder* spans() { return config_.timeline.empty() ? nullptr : timeline_.recorder(rank()); }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  // The end of run(): --save and --timeline, and this rank's memory for memory_per_rank.
  void writeOutputs();
  nlohmann::json memoryPerRank();
  std::shared_ptr<const data::Dataset> train_;
  std::unique_ptr<runtime::Task> task_;
  std::vector<std::vector<int64_t>> clients_;
  std::vector<char> malicious_;
  std::vector<char> slow_;  // --slow-clients
  comm::Communicator* comm_ = nullptr;  // --backend mpi (null: simulated in this process)
  // --backend mpi: the reporters' results trained elsewhere, from their hosts.
  void exchangeResults(std::vector<ClientResult>& results);
  bool hosts(size_t reporterIndex) const;
  int hostOf(size_t reporterIndex) const { return 1 + static_cast<int>(reporterIndex % (comm_->size() - 1)); }
  std::unique_ptr<RoundServer> roundServer_;  // --deadline-clock wall, rank 0
  // Simulated seconds of client k's local training (--round-deadline-s).
  double clientSeconds(int k) const;
  std::shared_ptr<nn::Module> server_;
  std::unique_ptr<optim::Optimizer> serverOptimizer_;
  std::vector<std::unique_ptr<LocalTrainer>> workers_;
  std::vector<float> global_, update_;
  RdpAccountant accountant_;
  int64_t bytesUp_ = 0, bytesDown_ = 0;
};

}  // namespace dtrain::federated
