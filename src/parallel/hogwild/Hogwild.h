#pragma once
// Hogwild! (Niu, Recht, Re, Wright 2011): N threads of one process train ONE
// shared parameter set without locks, each on its own data shard. Every rank
// (a thread of the `local` backend) keeps its own model object, so its own
// activations and .grad, but the data() of each of its parameter Variables (and
// each buffer) is the same tensor as every other rank's: one storage, N
// writers. A rank's optimizer step writes straight into that storage while the
// other ranks read it in their forward and backward passes and write it in
// their own steps. Nothing is combined, nothing waits: ranks run at their own
// pace (no collective per step; the only collectives are one barrier after
// setup and one in finish()).
//
// Memory model, honestly: concurrent non-atomic reads and writes of the same
// floats are a data race, which is undefined behaviour in the C++ memory model.
// The compiler may assume no other thread touches the parameters during a
// kernel (it may keep values in registers, reload or re-store them). What
// happens in practice on x86-64 with the kernels of this project:
//   - aligned 4-byte loads and stores are single instructions and are not
//     torn: a reader sees some float that a writer wrote, never half of one;
//   - vectorized loops (GEMM panels, the SGD update) read a mix of old and new
//     values across elements: a forward pass may see layer 1 after another
//     rank's update and layer 2 before it, or half a row updated;
//   - the update p[j] = p[j] - lr * d[j] is a read-modify-write: when two ranks
//     update the same weight at once, one update is lost (both read the old
//     value, the second store wins).
// Hogwild!'s premise is that with sparse updates (each step touches few
// coordinates, so collisions are rare) or small ones this costs little, and
// its analysis bounds the harm. The models here are dense: every step of every
// rank reads and writes every weight, so they lose more updates than the
// paper's sparse problems. A loss needs two update loops at the same element
// at the same moment (each element is loaded just before it is stored), so
// far fewer increments are lost than updates overlap in time; stats() reports
// the fraction of this rank's updates that overlapped another's (an upper
// bound, and a high one where ranks outnumber the cores: a descheduled rank
// holds its update open). The larger cost of asynchrony here is staleness: a gradient
// lands after ~N-1 other updates changed the parameters it was computed from.
// It converges anyway: tests/parallel/HogwildTest.cpp trains mlp on
// Fashion-MNIST to >= 85% test accuracy with 4 workers (cosine schedule, 3
// epochs; the test explains the choice). ThreadSanitizer reports these races
// by design: the tests skip themselves under TSan.
//
// Optimizer state (the SGD momentum buffer, Adam's moments) stays per rank:
// each rank's buffer accumulates only its own gradients, and is applied to the
// shared parameters through its own steps. Every gradient still contributes
// lr/(1-momentum) in total, as in sequential SGD, but its momentum tail is
// spread over that rank's next ~1/(1-momentum) steps, which interleave with
// the other ranks' steps: asynchrony adds an implicit momentum on top of the
// explicit one (Mitliagkas et al. 2016, "Asynchrony begets momentum"). This is
// also what PyTorch's Hogwild example does (each process builds its own
// optimizer). A shared buffer would give the momentum of the sequence of all
// updates, at the price of a second racy read-modify-write stream per step.
// A checkpoint saved by rank 0 holds the shared parameters and rank 0's state.
//
// Rank 0's --load wins: it publishes clones of its parameters and buffers (so
// a checkpoint it loaded is the shared start), and every rank adopts them. Each
// rank's learning-rate schedule follows its own step count (the trainer's), and
// the loss it logs is its own.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/Communicator.h"
#include "parallel/Strategy.h"

namespace dtrain::parallel {

// The parameters and buffers shared by the ranks of one run, by name. Created
// once by the launcher and handed to every rank's Hogwild strategy. The map is
// guarded by a mutex (publish/lookup happen at setup); the tensors' contents
// are not (that is the point).
class HogwildShared {
 public:
  explicit HogwildShared(int worldSize = 0);
  HogwildShared(const HogwildShared&) = delete;
  HogwildShared& operator=(const HogwildShared&) = delete;

  // Stores `value` (not copied: the caller passes a tensor it gives up) under
  // `name`, replacing any earlier one.
  void publish(const std::string& name, Tensor value);
  // The tensor published under `name` (aliases the shared storage); throws
  // naming the missing entry and what was published.
  Tensor get(const std::string& name) const;
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;

  // Each rank's count of applied updates, recorded in finish(); read after the
  // finish barrier (report()). Sized on first record when worldSize was 0.
  void recordUpdates(int rank, int64_t updates);
  std::vector<int64_t> updatesPerRank() const;
  // Brackets one rank's update: endUpdate(beginUpdate()) is true when another
  // rank's update was running when this one began or began before it ended
  // (the updates that may have lost, or made others lose, increments).
  int64_t beginUpdate();
  bool endUpdate(int64_t token);
  // Updates begun so far by all ranks together.
  int64_t totalUpdates() const { return started_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Tensor> tensors_;
  std::vector<int64_t> perRank_;
  std::atomic<int64_t> started_{0};
  std::atomic<int> active_{0};
};

class Hogwild final : public Strategy {
 public:
  // `comm` (a `local` backend communicator: ranks are threads) must outlive the
  // strategy; every rank of the run gets the same `shared`.
  Hogwild(comm::Communicator& comm, std::shared_ptr<HogwildShared> shared);

  std::string name() const override { return "hogwild"; }
  int rank() const override { return comm_.rank(); }
  int worldSize() const override { return comm_.size(); }
  // Ranks are threads of one process: the launcher sets intra-op threads.
  bool ownsProcess() const override { return false; }
  bool checkpointsBetweenSteps() const override { return false; }

  void setup(nn::Module& model, optim::Optimizer& optimizer) override;
  // optimizer.step() straight into the shared storage, without a lock.
  void applyUpdate(optim::Optimizer& optimizer) override;
  // This rank's own value: ranks are not in lockstep, so there is no
  // collective per logged step (rank 0 logs its own loss).
  double reduceMetric(double localValue) override { return localValue; }
  std::vector<memory::RankMemory> gatherMemory(const memory::RankMemory& mine) override;
  // hogwild_updates (this rank), hogwild_updates_per_s (this rank, since
  // setup), hogwild_overlap_fraction (of this rank's updates, those that ran
  // concurrently with another rank's), hogwild_total_updates (all ranks so far).
  std::map<std::string, double> stats() const override;
  // After finish(): {"hogwild_updates_per_worker": [...]}.
  nlohmann::json report() const override;
  // Barrier, so the reporter's final evaluation sees every rank's last update.
  void finish(nn::Module& model, optim::Optimizer& optimizer) override;

  const std::shared_ptr<HogwildShared>& shared() const { return shared_; }
  int64_t updates() const { return updates_; }

 private:
  comm::Communicator& comm_;
  std::shared_ptr<HogwildShared> shared_;
  bool setUp_ = false;
  int64_t updates_ = 0, overlapped_ = 0;
  double startUs_ = 0, lastUs_ = 0;
  std::vector<int64_t> perRank_;  // filled in finish()
};

}  // namespace dtrain::parallel
