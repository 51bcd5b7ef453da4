#pragma once
// Sandblaster (Dean et al., "Large Scale Distributed Deep Networks", 2012):
// batch optimization with one coordinator and many workers. The coordinator
// (comm rank 0) runs the trainer with L-BFGS (optim/Lbfgs.h); every batch
// gradient it needs (the step's, and each line-search trial's) is cut into
// --work-units K units of consecutive samples, handed to workers as they
// become free (a fast worker takes more units than a slow one). When every unit
// is out, a free worker gets a copy of the oldest unit still pending (a backup
// task) and the first answer wins. The batch gradient is the sum of the unit
// gradients (each weighted by its share of the samples) in unit order, so it
// is the same whichever worker computed each unit.
//
// Messages: the coordinator sends a unit as a header, the parameters (only
// when the worker's copy is older than this evaluation) and the unit's samples
// (--sandblaster-data coordinator), or only where the samples are (the step's
// batch and the unit's range in it: --sandblaster-data workers, the default),
// and the worker reads them from its own copy of the data, as DistBelief's
// workers read their data shards; a worker answers with (evaluation, unit, loss) and the unit's gradient. An
// answer for an older evaluation (a straggler's, overtaken by a backup) is
// dropped.
//
// With --sandblaster-servers S (DistBelief's layout), ranks 1..S are parameter
// shards holding the parameters and the L-BFGS history, the vector operations
// run on them and only scalars reach the coordinator (ShardProtocol.h,
// LbfgsShard.h, ShardedLbfgs.h); the workers are ranks S+1.. and pull the
// parameters from the shards and push their unit gradients to them. Without
// it (S = 0) the coordinator holds both, as above.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "data/Dataset.h"
#include "optim/Lbfgs.h"
#include "parallel/Strategy.h"
#include "parallel/sandblaster/ShardedLbfgs.h"

namespace dtrain::parallel::sandblaster {

struct SandblasterOptions {
  int servers = 0;        // parameter shards (ranks 1..servers); 0: the coordinator holds all
  int workUnits = 0;      // units per batch gradient (0: 4 per worker)
  bool backups = true;    // re-issue pending units to free workers
  bool workersRead = true;  // workers read their units' samples (else the coordinator sends them)
  // Fault injection (--straggler, --random-delay), by comm rank: a worker
  // (rank >= 1) sleeps this long per unit it computes.
  std::map<int, double> stragglerMs;
  double randomDelayMs = 0;
  uint64_t seed = 0;
};

// Comm rank 0: the trainer's strategy. Workers are ranks servers+1..size-1.
class SandblasterCoordinator final : public Strategy {
 public:
  SandblasterCoordinator(comm::Communicator& comm, SandblasterOptions o);
  ~SandblasterCoordinator() override;
  std::string name() const override { return "sandblaster"; }
  int rank() const override { return 0; }
  int worldSize() const override { return comm_.size(); }
  // The coordinator's trainer reads the whole batch (it sends the samples, or
  // only where they are); a worker reads the batches of the units it gets.
  int dataRank() const override { return 0; }
  int dataReplicas() const override { return 1; }
  bool ownsProcess() const override { return std::string(comm_.backend()) != "local"; }
  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  double forwardBackward(nn::Module& model, const StepWork& work) override;
  // Sharded: the L-BFGS iteration through the shards (the optimizer's
  // options; its own step() would need the vectors here).
  void applyUpdate(optim::Optimizer& optimizer) override;
  // Sharded: the parameters (and, for checkpoints, the history) from the shards.
  void syncModel(nn::Module& model, optim::Optimizer* optimizer) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;
  std::map<std::string, double> stats() const override;
  nlohmann::json report() const override;

 private:
  struct Peer;
  // One batch-gradient evaluation of x_, y_ at the current parameters (the
  // model's, or the shards'): the loss; unsharded, the gradient into `model`.
  double evaluate(nn::Module* model);
  int workerRank(int w) const { return 1 + o_.servers + w; }
  void assign(int w, int unit);
  bool collect(int w);  // true when an answer arrived
  void postAnswer(int w);
  comm::Communicator& comm_;
  SandblasterOptions o_;
  int workers_;
  int64_t params_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;
  // The evaluation in progress.
  int64_t evaluation_ = 0;
  std::shared_ptr<std::vector<float>> paramsNow_;
  Tensor x_, y_;
  int64_t batchEpoch_ = -1, batchStep_ = -1;  // where workers read x_, y_
  std::vector<int64_t> unitStart_;  // K + 1 sample offsets
  std::vector<std::vector<float>> unitGrad_;
  std::vector<double> unitLoss_;
  std::vector<char> unitDone_;
  std::vector<int> unitCopies_;
  std::vector<std::chrono::steady_clock::time_point> unitSent_;
  // Figures.
  std::vector<int64_t> unitsByWorker_;
  int64_t evaluations_ = 0, backups_ = 0, backupsWon_ = 0, answersDropped_ = 0;
  bool finished_ = false;
  // Sharded (servers > 0).
  std::unique_ptr<ShardedLbfgs> shards_;
  optim::Lbfgs* lbfgs_ = nullptr;
  double stepLoss_ = 0;
  int64_t sampleBytes_ = 0, gatherBytes_ = 0;
};

// Comm ranks 1..size-1: computes the units the coordinator sends until it says
// the run is over. `lossFromOutput` is the task's mean loss of a micro-batch;
// `readBatch` gives the batch of a global step (in an epoch) as the
// coordinator's trainer reads it, for units the worker reads itself (empty:
// the worker reads nothing and such a unit is an error).
struct WorkerStats {
  int64_t units = 0;
};
using BatchReader = std::function<const data::Batch&(int64_t epoch, int64_t step)>;
WorkerStats runSandblasterWorker(
    comm::Communicator& comm, nn::Module& model,
    const std::function<autograd::Variable(const autograd::Variable&, const Tensor&)>& lossFromOutput,
    const SandblasterOptions& o, const BatchReader& readBatch = {});

}  // namespace dtrain::parallel::sandblaster
