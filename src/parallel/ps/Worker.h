#pragma once
// The worker side of the parameter-server strategy (--strategy ps): computes
// gradients on its shard of every global batch, pushes them to the servers
// (one message per server: the slices it owns, batched) and fetches
// parameters, as the consistency model says:
//
//  - sync: push every step and wait for the step's update;
//  - async (Downpour): push the gradients accumulated over --push-every steps,
//    fetch every --fetch-every steps, never wait for other workers;
//  - ssp: push every step; fetch only when the cached parameters are too
//    stale (older than step - s), the servers answering once the slowest
//    worker has caught up to within s steps.
//
// The optimizer runs on the servers: this rank's optimizer only receives the
// servers' state at the end, for the checkpoint.
#include <memory>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/Strategy.h"
#include "parallel/ps/Protocol.h"
#include "parallel/ps/PsOptions.h"
#include "parallel/ps/ServerStats.h"
#include "parallel/ps/ShardPlan.h"

namespace dtrain::parallel::ps {

class PsWorker final : public Strategy {
 public:
  // comm's ranks: servers first, then workers; this rank must be a worker.
  PsWorker(comm::Communicator& comm, PsOptions options);
  ~PsWorker() override;
  PsWorker(const PsWorker&) = delete;
  PsWorker& operator=(const PsWorker&) = delete;

  std::string name() const override { return "ps"; }
  int rank() const override { return worker_; }
  int worldSize() const override { return opts_.workers; }
  bool ownsProcess() const override;

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override { step_ = step; }
  void finishGradients() override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  bool stopBefore(int64_t step) override;
  void syncModel(nn::Module& model, optim::Optimizer* optimizer) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;
  // wait_ms (per step, blocked on servers), pushes, fetches, bytes_sent_per_worker
  // (per step), and with ssp read_staleness_max (steps between the slowest
  // worker's clock in the cached parameters and this step; ssp keeps it <= s).
  std::map<std::string, double> stats() const override;
  // Worker 0, after finish(): the servers' statistics (updates, bytes,
  // staleness histogram, wait per worker, dead workers).
  nlohmann::json report() const override;
  // Worker 0, after finish(): each server's raw statistics.
  const std::vector<ServerStats>& serverStats() const { return serverStats_; }

 private:
  void sendInit(optim::Optimizer& optimizer);
  void push(int s, int32_t flags, double lr);
  void sendCtrl(int s, Kind kind, int64_t step);
  void receiveParams();
  // Waits for an operation with server s; while it waits, tells the other
  // servers this worker lives. Throws naming s after replyTimeoutS.
  void waitServer(comm::Work& work, int s, const char* what);
  void receiveFinal();
  void waitShutdown();
  std::vector<float*> paramPtrs();
  std::string serverName(int s) const;

  comm::Communicator& comm_;
  PsOptions opts_;
  int worker_;
  ShardPlan plan_;
  std::vector<autograd::Variable> params_;
  // Per server: header + the gradients accumulated since the last push (filled
  // in place: the buffer is refilled only once its previous push has left).
  std::vector<std::vector<float>> pushBuf_, ctrlBuf_, replyBuf_;
  std::vector<comm::WorkPtr> pushWork_, ctrlWork_;
  std::vector<int64_t> sent_;                  // pushes sent, per server
  std::vector<int64_t> version_;               // version of the cached shard, per server
  std::vector<int64_t> accumVersion_;         // per server: version at the first accumulated step
  int64_t accumulated_ = 0;
  int64_t cachedMinClock_ = 0;
  int64_t step_ = 0;
  bool fresh_ = false, finished_ = false, dead_ = false;
  // Final state (worker 0).
  std::vector<std::vector<float>> finalPayload_;
  std::vector<Header> finalHeader_;
  std::vector<ServerStats> serverStats_;
  // Figures.
  int64_t steps_ = 0, pushes_ = 0, fetches_ = 0, readStalenessMax_ = 0;
  double waitS_ = 0, bytesSent_ = 0;
};

}  // namespace dtrain::parallel::ps
