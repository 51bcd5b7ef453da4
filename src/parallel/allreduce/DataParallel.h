#pragma once
// Synchronous data parallelism with allreduce (Horovod, PyTorch DDP): every rank
// holds a replica, computes gradients on its slice of the global batch, the
// gradients are averaged with allreduce and every replica applies the same
// update, so replicas stay identical.
//
//  - Start: rank 0's parameters, buffers and optimizer state are broadcast.
//  - Tensor fusion: gradients live in fusion buckets (FusionBuckets.h).
//  - Overlap (wait-free backpropagation): a bucket's allreduce is handed to this
//    strategy's communication thread from the gradient-ready hook of its last
//    parameter, while backward goes on with the layers below. Buckets are always
//    launched in bucket order, on every rank, so the collectives match even if
//    hooks within a layer fire in a different order.
//  - Averaging: allreduce(sum) then x 1/N on the communication thread. Each rank's
//    loss is the mean over its B samples, so the result is the gradient of the
//    mean over the N*B samples of the global batch (the single-worker gradient).
//  - Compression (--compress): each bucket has a Compressor (parallel/compress/)
//    that does the averaging instead, on the same thread, when the bucket is
//    ready; "none" is the plain allreduce above.
//  - Sufficient factor broadcasting (--sfb, SufficientFactors.h): a Linear
//    weight chosen for it gets a bucket of its own whose "compressor" allgathers
//    the layer's input rows and output-gradient rows and rebuilds the mean
//    gradient; launched like any bucket, so it overlaps backward the same way.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/Communicator.h"
#include "nn/Layers.h"
#include "parallel/StepTraffic.h"
#include "parallel/Strategy.h"
#include "parallel/allreduce/FusionBuckets.h"
#include "parallel/allreduce/SufficientFactors.h"
#include "parallel/compress/Compressor.h"

namespace dtrain::parallel {

// Default bucket size: small enough that the mlp's gradients make two buckets,
// so one of them can overlap backward, and large enough that a small model's
// gradients pay one call's latency.
inline constexpr double kDefaultFusionMb = 0.25;

struct DataParallelOptions {
  double fusionMb = kDefaultFusionMb;
  bool overlap = true;  // false: launch every bucket after backward (--no-overlap)
  // --sync-bn: every nn::BatchNorm2d of the model normalizes by the statistics
  // of all replicas' batches (torch.nn.SyncBatchNorm): its forward allreduces
  // the per-channel [sum | squared sum | count], its backward [sum dy | sum dy
  // (x - mean)], on a communicator of their own (split at setup) from the
  // rank's thread, while the communication thread uses the strategy's.
  bool syncBn = false;
  comm::Algorithm algo = comm::Algorithm::Auto;
  compress::CompressOptions compress;
  // Sufficient factor broadcasting: off, every Linear weight (on), or those
  // whose factors send fewer bytes than their allreduce (auto, sfbPays); sfbRows = the rows a rank's Linear
  // layers see per step (--batch-size x --accumulate, x the context for language models).
  SfbMode sfb = SfbMode::Off;
  int64_t sfbRows = 0;
};

// Makes replicas start from rank 0's state whatever their seeds (and whatever a
// rank's --load said): parameters, buffers, optimizer state and step count.
// Collective. Returns whether there was optimizer state (then every rank has it).
bool broadcastReplicaState(comm::Communicator& comm, nn::Module& model,
                           optim::Optimizer& optimizer);
// The mean over ranks of a per-rank scalar (the loss). Collective.
double meanOverRanks(comm::Communicator& comm, double localValue);

class DataParallel final : public Strategy {
 public:
  // `comm` must outlive the strategy.
  DataParallel(comm::Communicator& comm, DataParallelOptions options = {});
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  std::string name() const override { return "allreduce"; }
  int rank() const override { return comm_.rank(); }
  int worldSize() const override { return comm_.size(); }
  bool ownsProcess() const override;

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override;
  void beginMicroStep(int index, int count) override;
  void finishGradients() override;
  double reduceMetric(double localValue) override;
  bool anyRankStops(bool mine) override;
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  // The compressors' state (compressorState()) of every rank.
  std::map<std::string, Tensor> checkpointState() override;
  void loadCheckpointState(const std::map<std::string, Tensor>& saved) override;
  // Per-step means over the run so far: compute_ms (forward + backward),
  // comm_ms (allreduce time on the communication thread), hidden_ms (the part
  // of comm_ms that ran while backward was still going), exposed_ms (time the
  // step waited for communication after backward), bytes_sent_per_worker and
  // bytes_received_per_worker (measured by the communicator, this rank, per step),
  // bytes_sent_total (the whole run so far, set-up broadcasts included).
  // compressed_bytes_per_step (the messages this rank hands to the collectives).
  std::map<std::string, double> stats() const override;
  // With --sfb: "sfb_layers", the Linear weights whose gradients travel as factors.
  nlohmann::json report() const override;

  size_t bucketCount() const { return buckets_.size(); }
  const std::vector<FusionBucket>& buckets() const { return buckets_; }
  // The compressors' state across steps (error-feedback residuals, PowerSGD's
  // Q), by name ("compress.bucket0.residual"); this rank's own, set up by setup().
  std::vector<std::pair<std::string, Tensor*>> compressorState();
  // The weights exchanged as sufficient factors (empty without --sfb).
  std::vector<std::string> sfbLayers() const;

 private:
  void onGradReady(size_t bucket);
  void launchInOrder(bool all);
  void commLoop();
  void runBucket(size_t i);

  comm::Communicator& comm_;
  DataParallelOptions opts_;
  // --sync-bn: shared with the BatchNorm layers' sync functions, which may
  // outlive this strategy (the model is destroyed after or before it).
  std::shared_ptr<comm::Communicator> bnComm_;
  std::vector<FusionBucket> buckets_;
  std::vector<std::unique_ptr<compress::Compressor>> compressors_;  // one per bucket
  std::vector<std::unique_ptr<SufficientFactors>> factors_;        // --sfb's layers
  std::vector<int> bucketFactors_;  // per bucket: index into factors_, or -1
  int64_t gradBytes_ = 0;

  // Training thread only.
  std::vector<size_t> ready_;  // per bucket: parameters whose gradient is final
  size_t nextLaunch_ = 0;
  bool syncing_ = true;        // this backward is the communicating one
  int64_t step_ = 0;           // read by the communication thread (after the queue's lock)

  // Shared with the communication thread (under mu_).
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable workCv_, doneCv_;
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<double> startUs_, endUs_;  // per bucket, this step

  // Totals for stats().
  StepTraffic traffic_;
  double payloadBytes_ = 0;  // communication thread, read after a step
};

}  // namespace dtrain::parallel
