#pragma once
// Pipeline parallelism (GPipe, 1F1B) with data parallelism across pipelines
// and tensor parallelism within stages: the "pipeline" strategy of a
// dp x pp x tp mesh (parallel/Mesh.h).
//
// Every rank builds the whole model (same seed, so the same initial values)
// and runs only its stage's layers (Partition.h); the optimizer skips the
// parameters without gradients, so each rank updates only its stage. At the
// first step the world's rank 0 measures the layers on one micro-batch, plans
// the cut and broadcasts it with the layers' output shapes, so every stage
// knows the activation shapes it sends and receives.
//
// A step (forwardBackward) runs the stage's part of the schedule (Schedule.h)
// over M micro-batches of --batch-size / M samples. Activations go forward
// and their gradients backward by point-to-point messages on the pipeline's
// communicator: every receive of the step is posted (irecv) before the first
// op and every send is asynchronous (isend), so transfers overlap with
// compute; an op waits only for its own input (the wait is the stage's idle
// time, the bubble). The last stage seeds each micro-batch's backward with
// 1/M, so the accumulated gradients are the mean over the batch, as in one
// process.
//
// Tied weights (gpt's wte, used by the embedding on stage 0 and lm_head on the
// last stage) live on both stages: after backward the two exchange their
// gradients and both add them (the same sum on both, so both apply the same
// update). The dp dimension combines each stage's gradients with the dp
// strategy (DataParallel, compressed or not, or ZeRO 1/2) on the stage's
// replica communicator; the exchange, the global norm and clipping go over
// the pieces it holds (Strategy::heldGradients).
//
// The reporter (rank 0: replica 0, stage 0) evaluates and saves the whole
// model: the other stages send their parameters (and optimizer state when
// saving) to it at the end, before each evaluation (every --eval-every steps)
// and for each checkpoint; it frees them again at the next step, so while
// training every rank holds only its stage's model states.
//
// --virtual-stages v interleaves 1F1B: the cut is into P*v model chunks and
// stage s runs chunks s, s+P, ...; activations go round the stages v times.
//
// With --tensor-parallel T each stage's layers are cut across the T ranks of
// its tensor-parallel group (tensor/Shards.h) once the plan is known (rank 0
// profiles the whole layers first); activations at stage boundaries are whole
// on every slice, so slice t of stage s talks to slice t of stage s+1 only.
// Before a gather each stage's group assembles its whole tensors on slice 0,
// which swaps them in, and the slice-0 pipeline gathers as above.
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "nn/LayerSequence.h"
#include "parallel/Strategy.h"
#include "parallel/Mesh.h"
#include "parallel/pipeline/StagePartition.h"
#include "parallel/pipeline/PipelineSchedule.h"
#include "parallel/tensor/Shards.h"

namespace dtrain::parallel::pipeline {

struct PipelineOptions {
  int stages = 2;
  int tensorParallel = 1;  // --tensor-parallel: each stage's layers cut across T ranks
  int microBatches = 1;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int virtualStages = 1;   // --virtual-stages: model chunks per stage (interleaved 1F1B)
  std::vector<int> split;  // --pipeline-split; empty: balanced by measured time
  bool spread = false;     // --placement spread
  int64_t gatherEvery = 0;     // steps between gathers to the reporter (--eval-every); 0: end only
  bool gatherOptimizer = false;  // the reporter saves a checkpoint: gather optimizer state too
  // The dp dimension's gradient averaging on a stage's replicas (when dp > 1).
  std::function<std::unique_ptr<Strategy>(comm::Communicator& replicas)> makeDataParallel;
};

class PipelineParallel final : public Strategy {
 public:
  // Collective over `world` (splits it into the mesh); `world` must outlive this.
  PipelineParallel(comm::Communicator& world, PipelineOptions options);
  ~PipelineParallel() override;

  std::string name() const override { return "pipeline"; }
  int rank() const override { return world_.rank(); }
  int worldSize() const override { return world_.size(); }
  int dataRank() const override { return mesh_.coord().replica; }
  int dataReplicas() const override { return mesh_.dp(); }
  bool ownsProcess() const override;

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  void beginStep(int64_t step) override;
  double forwardBackward(nn::Module& model, const StepWork& work) override;
  void zeroGradients(nn::Module& model) override;
  void finishGradients() override;
  void applyUpdate(optim::Optimizer& optimizer) override;
  double gradNormSquared(nn::Module& model) override;
  void scaleGradients(nn::Module& model, float coef) override;
  double reduceMetric(double localValue) override;
  bool anyRankStops(bool mine) override;
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;
  // Collective: the stages' parameters and optimizer state to the reporter,
  // which then saves the whole model (--checkpoint-every, --save); no per-rank
  // state of its own.
  std::map<std::string, Tensor> checkpointState() override;
  // Per rank: pipeline_stage, pipeline_bubble (idle / step time of this stage),
  // pipeline_peak_in_flight (micro-batches), pipeline_activation_bytes_peak.
  std::map<std::string, double> stats() const override;
  // Per stage lists (gathered by finish()) and the plan: bubble, micro-batches
  // in flight, activation bytes, parameter bytes (what the stage trains).
  nlohmann::json report() const override;
  // Every rank's allocator figures (memory_per_rank), by world rank: a stage's
  // activations_peak is what its schedule really held.
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;

 private:
  void plan(const Tensor& microBatch);
  // Parameter indices (in the model's order) stage `stage` owns: those whose
  // first use in the layer sequence is one of its layers (known from the plan).
  std::vector<size_t> ownedBy(int stage) const;
  // The layers of stage `stage`'s chunks, in order.
  std::vector<int> layersOf(int stage) const;
  // Names of the parameters of `layers`.
  std::set<std::string> parameterNames(const std::vector<int>& layers) const;
  void exchangeTiedGradients();
  // Stages > 0 send their parameters (and optimizer state) to stage 0.
  void gatherToStageZero(bool withOptimizer);
  // Frees the other stages' parameters and optimizer state (the reporter's
  // after each gather, once the evaluation or checkpoint that needed them is done).
  void releaseOthers();
  int lastStage() const { return mesh_.pp() - 1; }

  comm::Communicator& world_;
  PipelineOptions opts_;
  Mesh mesh_;
  std::unique_ptr<tensor::Shards> shards_;  // null when tp = 1
  std::unique_ptr<Strategy> dataParallel_;  // null when dp = 1
  nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;
  std::vector<nn::SequenceLayer> layers_;
  std::vector<int> cuts_;            // first layer of each stage
  std::vector<Shape> outputShapes_;  // per layer, one micro-batch
  std::vector<int64_t> activationBytes_;  // per layer, one micro-batch
  nn::ModuleGroup stageModules_;     // this stage's layers' modules
  std::vector<size_t> stageParams_;  // parameter indices of this stage's layers (tied ones included)
  std::vector<size_t> others_;       // ... and of the other stages' (freed here)
  std::vector<int> ownerStage_;      // per parameter index: the stage of its first use (-1: none)
  std::vector<Shape> otherShapes_;   // their shapes, for the reporter's gathers
  std::vector<size_t> tied_;         // parameter indices shared with stage 0 / the last stage
  std::string planText_;
  int64_t step_ = 0;
  int64_t gatheredStep_ = -1;        // the step after which the reporter last gathered
  bool gatheredOptimizer_ = false;   // ... and whether the optimizer state came too

  // Figures.
  int64_t measuredSteps_ = 0;
  double idleUs_ = 0, busyUs_ = 0;  // summed over measured steps
  std::vector<int64_t> chunkActivationBytes_;  // per chunk of this stage, one micro-batch
  int64_t peakActivationBytes_ = 0;            // the most the schedule held at once
  int64_t parameterBytes_ = 0;  // of this stage's parameters (tied ones included)
  // By finish(), per figure, per stage: bubble, peak in flight, peak
  // activation bytes, parameter bytes.
  std::vector<std::vector<double>> perStage_;
};

}  // namespace dtrain::parallel::pipeline
