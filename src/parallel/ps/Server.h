#pragma once
// One parameter server (DistBelief, Project Adam): owns a shard of the
// parameters (ShardPlan) and the optimizer state of that shard, applies the
// workers' gradients and answers their fetches, under one of three
// consistency models:
//
//  - sync (BSP): step t's update averages the first W-b step-t gradients to
//    arrive (b = backup workers; late ones are dropped and their senders get the
//    new parameters), so with b = 0 it is the allreduce strategy's update;
//  - async (Downpour SGD): every push is applied when it arrives;
//  - ssp (stale synchronous parallel): pushes are applied when they arrive, but
//    a fetch for step t is answered only once every live worker has completed
//    step t - s (s = staleness), so no worker runs more than s steps ahead of
//    the slowest.
//
// The server is a single-threaded event loop over nonblocking receives (one
// push and one control receive posted per worker); its sends never block
// (Outbox). Liveness (Heartbeat.h): a worker is dead after PsOptions::timeoutS
// without any message or heartbeat from it. Async and ssp go on without it,
// sync goes on while W-b workers remain and otherwise fails with an error
// naming it. A worker declared dead that speaks again is re-admitted (said on
// stderr): it is told so with the heartbeats and refreshes its parameters at
// its next step; under sync with backup workers its late pushes are dropped
// and answered with the current parameters until it is back in step.
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "comm/Communicator.h"
#include "nn/Module.h"
#include "optim/Optimizer.h"
#include "parallel/ps/PushCodec.h"
#include "parallel/ps/Heartbeat.h"
#include "parallel/ps/Outbox.h"
#include "parallel/ps/Protocol.h"
#include "parallel/ps/PsOptions.h"
#include "parallel/ps/ServerStats.h"
#include "parallel/ps/ShardPlan.h"

namespace dtrain::parallel::ps {

class ParameterServer {
 public:
  // `model` gives the parameter names and shapes (its values are replaced by
  // worker 0's at start). comm's ranks: servers first, then workers.
  ParameterServer(comm::Communicator& comm, const nn::Module& model, PsOptions options);
  ~ParameterServer();  // withdraws receives still posted
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  // Serves until every worker is done or dead; then sends worker 0 the final
  // parameters, optimizer state and statistics. Throws on a fatal fault.
  ServerStats run();

  int64_t shardSize() const { return n_; }

 private:
  struct Peer {
    std::vector<float> pushBuf, ctrlBuf;  // header + payload
    comm::WorkPtr pushWork, ctrlWork;
    std::deque<Header> parked;    // control messages waiting for their turn
    std::vector<float> syncGrad;  // sync: this step's accepted push (header + gradient)
    int64_t pushesDone = 0;       // pushes handled
    int64_t clock = 0;            // steps completed (pushed)
    bool done = false, dead = false, awaitingStep = false;
    std::chrono::steady_clock::time_point lastHeard;
  };

  void receiveInit();
  void postPush(int w);
  void postCtrl(int w);
  void handlePush(int w);
  void handleSyncPush(int w, const Header& h, const float* grad);
  void foldSync(bool closing);
  void closeSyncStep();
  // Sync --clip-grad-norm: scales the step's mean gradient (grad_) by torch's
  // coefficient for the global norm, the servers' squared norms summed in
  // server order (the same sum, so the same coefficient, on every server).
  void clipSyncGradient();
  bool serveParked(int w);
  // buf = a Params header (flags) + the shard's current parameters.
  void writeParams(std::vector<float>& buf, int32_t flags);
  void reply(int w, int32_t flags);
  void apply(const float* grad, double lr);
  // Seconds since worker w last sent a message or a heartbeat.
  double silence(int w) const;
  // Declares silent workers dead and re-admits dead ones that speak again.
  void checkLiveness();
  void declareDead(int w, double silentS);
  void readmit(int w);
  // Waits for a send to worker w while w lives; false once w is declared dead.
  bool waitForWorker(comm::Work& work, int w);
  int64_t minClock() const;
  int liveWorkers() const;
  bool allFinished() const;
  void sendFinal();
  [[noreturn]] void goSilent();
  std::string workerName(int w) const;
  void heard(int w);

  comm::Communicator& comm_;
  PsOptions opts_;
  int server_;
  ShardPlan plan_;
  int64_t n_ = 0;                  // floats in this shard
  std::unique_ptr<PushCodec> codec_;  // --compress: decodes the pushes (null: fp32)
  int64_t pushFloats_ = 0;            // floats of one push message
  Tensor params_, grad_;           // the shard, and the gradient it is updated with
  std::unique_ptr<optim::Optimizer> optimizer_;
  int64_t version_ = 0;            // updates applied
  std::vector<Peer> peers_;        // per worker
  ServerStats stats_;
  // sync
  int64_t step_ = 0;               // the step being collected
  // The first step collected (a resumed run starts past 0): droppedPerStep is
  // indexed from it, like appliedPerStep, so no peer's step number sizes a
  // vector (a corrupt first push of step 2^50 is one more step, not 8 PB).
  int64_t firstStep_ = 0;
  int accepted_ = 0;
  double stepLr_ = 0;
  int folded_ = 0;            // workers 0..folded_-1 are summed into grad_ (or absent)
  bool sumStarted_ = false;
  bool anyDone_ = false;
  Outbox outbox_;                   // replies in flight
  std::unique_ptr<Heartbeat> hb_;   // peers: the workers, in order
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dtrain::parallel::ps
