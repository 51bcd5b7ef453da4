#pragma once
// A Sandblaster shard's slice of the parameters and of the L-BFGS vectors,
// and what it does with the coordinator's commands and the workers' unit
// gradients, apart from the communicator: LbfgsShard.cpp's polling loop
// drives it with what arrives, tests/fuzz/targets/FuzzSandblaster.cpp with
// arbitrary bytes. Every number a message carries is checked before it
// becomes an index or a count (ShardProtocol.h: wholeNumber).
#include <cstdint>
#include <deque>
#include <vector>

#include "parallel/sandblaster/LbfgsShard.h"
#include "parallel/sandblaster/ShardProtocol.h"

namespace dtrain::parallel::sandblaster {

// Where a shard's replies and vectors go (the coordinator, over kReplyTag and kVectorTag).
class ShardLink {
 public:
  virtual ~ShardLink() = default;
  virtual void reply(shard::Reply r) = 0;
  virtual void sendVector(const std::vector<float>& v) = 0;  // n floats
  virtual void recvVector(std::vector<float>& v) = 0;        // resized to n, then filled
};

class ShardState {
 public:
  // The vectors a command works on exist from the start (n floats each), so a
  // command out of the coordinator's order computes nonsense, never reads past them.
  ShardState(size_t n, ShardLink& link)
      : n_(n), link_(link), x_(n, 0.0f), x0_(n, 0.0f), g_(n, 0.0f), gEval_(n, 0.0f), d_(n, 0.0f),
        q_(n, 0.0) {}

  size_t size() const { return n_; }
  const std::vector<float>& parameters() const { return x_; }
  // One command of the coordinator's (not kDone): its reply, and the vectors
  // that follow it, go to the link. kEvalEnd is answered by finishEvaluation().
  void handle(const shard::Command& c);
  // A worker's unit gradient slice (n floats) with its head; kept (swapped
  // out of `grad`) when it is the current evaluation's first copy of the unit.
  // Returns false for a goodbye head.
  bool acceptGradient(const shard::GradHead& head, std::vector<float>& grad);
  // kEvalEnd arrived and every unit is in: sum them and reply.
  bool evaluationPending() const { return endPending_; }
  bool evaluationComplete() const { return endPending_ && unitsIn_ == unitGrad_.size(); }
  void finishEvaluation();
  const ShardStats& stats() const { return stats_; }
  void countPull() { ++stats_.pulls; }

 private:
  void reply(shard::Reply r);
  void sumUnits();

  size_t n_, capacity_ = 10;
  ShardLink& link_;
  // The slice of the parameters and of L-BFGS's vectors.
  std::vector<float> x_, x0_, g_, gEval_, d_, sNew_, yNew_;
  std::vector<double> q_;
  std::deque<std::vector<float>> s_, y_;
  // The evaluation in progress.
  int64_t evaluation_ = 0, samples_ = 0;
  std::vector<int64_t> unitStart_;
  std::vector<std::vector<float>> unitGrad_;
  std::vector<char> unitDone_;
  size_t unitsIn_ = 0;
  bool endPending_ = false;
  bool pairReady_ = false;  // kPair computed sNew_, yNew_ for kKeepPair
  ShardStats stats_;
};

}  // namespace dtrain::parallel::sandblaster
