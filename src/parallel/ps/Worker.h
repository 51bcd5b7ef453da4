#pragma once
// The worker side of the parameter-server strategy (--strategy ps): computes
// gradients on its shard of every global batch, pushes them to the servers
// (one message per server: the slices it owns, batched) and fetches
// parameters, as the consistency model says:
//
//  - sync: push every step and wait for the step's update;
//  - async (Downpour): push the gradients accumulated over --push-every steps,
//    fetch every --fetch-every steps, never wait for other workers;
//  - ssp: push every step; fetch every --fetch-every steps (eager reads,
//    default) or only when the cached parameters are too stale (lazy reads),
//    the servers answering a fetch for step t once the slowest worker has
//    completed step t - s.
//
// Liveness (Heartbeat.h): a server is dead after --ps-timeout seconds without
// a message or heartbeat from it. A worker a server declared dead (it was
// silent, e.g. stopped) refreshes its parameters at its next step; one that
// learns the run ended while it was declared dead stops.
//
// The optimizer runs on the servers: this rank's optimizer only receives the
// servers' state at the end, for the checkpoint.
#include <functional>
#include <memory>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/Strategy.h"
#include "parallel/ps/Heartbeat.h"
#include "parallel/ps/Protocol.h"
#include "parallel/ps/PsOptions.h"
#include "parallel/ps/PushCodec.h"
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
  // Workers stop at their own steps; a server closing a synchronous step would
  // wait for one that left: a signal ends a ps run without a checkpoint.
  bool savesOnStop() const override { return false; }
  bool checkpointsBetweenSteps() const override { return false; }
  int rank() const override { return worker_; }
  int worldSize() const override { return opts_.workers; }
  bool ownsProcess() const override;

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override { step_ = step; }
  // --clip-grad-norm: async and ssp clip this worker's gradient (the default
  // norm and scaling over the model's gradients: they are copied into the push
  // only in applyUpdate); sync leaves it to the servers, which clip the mean.
  void scaleGradients(nn::Module& model, float coef) override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  bool stopBefore(int64_t step) override;
  void syncModel(nn::Module& model, optim::Optimizer* optimizer) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;
  // wait_ms (per step, blocked on servers), pushes, fetches, bytes_sent_per_worker
  // (per step), and with ssp read_staleness_max (steps between the slowest
  // worker's clock in the cached parameters and this step; ssp keeps it <= s).
  std::map<std::string, double> stats() const override;
  // Worker 0, after finish(): the servers' figures and the other workers' (from
  // their Done messages, via server 0), in world rank order.
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  // Worker 0, after finish(): the servers' statistics (updates, bytes,
  // staleness histogram, wait per worker, dead workers).
  nlohmann::json report() const override;
  // Worker 0, after finish(): each server's raw statistics.
  const std::vector<ServerStats>& serverStats() const { return serverStats_; }

 private:
  void sendInit(optim::Optimizer& optimizer);
  // Adds this step's gradients into the push buffers (after clipping).
  void stageGradients();
  void push(int s, int32_t flags, double lr);
  void sendCtrl(int s, Kind kind, int64_t step);
  void receiveParams();
  // Waits for an operation with server s; throws naming s once s has been
  // silent (no message, no heartbeat) for --ps-timeout.
  void waitServer(comm::Work& work, int s, const char* what);
  void receiveFinal();
  // Fault injection: silent until the servers end the run (kill) or have all
  // declared this worker dead (pause).
  void playDead();
  void pauseUntilDeclaredDead();
  // Blocks until pred() (checked as heartbeats arrive) holds; throws when the
  // job is aborted meanwhile.
  void waitForServers(const std::function<bool()>& pred);
  // Notices the servers sent with their heartbeats since the last look
  // (Heartbeat.h); true when one declared this worker dead.
  bool declaredDead();
  bool runOver() const;
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
  // --compress: per server, the codec and the encoded push in flight (the
  // accumulation buffer above is then free as soon as it is encoded).
  std::vector<std::unique_ptr<PushCodec>> codecs_;
  std::vector<std::vector<float>> codedBuf_;
  std::vector<int64_t> sent_;                  // pushes sent, per server
  std::vector<int64_t> version_;               // version of the cached shard, per server
  std::vector<int64_t> accumVersion_;         // per server: version at the first accumulated step
  std::unique_ptr<Heartbeat> hb_;             // peers: the servers, in order
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
