#pragma once
// The train arguments a launch passes on: the user's, with --backend mpi,
// --resume auto, --workers W and a per-rank batch (and accumulation) that keep
// the first attempt's global batch on W workers.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::cli::launch {

// The value of --name (as "--name V" or "--name=V"), the last one given.
std::optional<std::string> flagValue(const std::vector<std::string>& args, const std::string& name);
std::vector<std::string> dropFlag(const std::vector<std::string>& args, const std::string& name);
// A non-negative integer flag (UsageError when not one), `fallback` when absent.
int64_t intFlag(const std::vector<std::string>& args, const std::string& name, int64_t fallback);

// Per-rank batch and accumulation that keep workers x batch x accumulate at the
// global batch: the batch scaled when it divides, else the accumulation.
struct BatchPlan {
  int64_t batch = 0, accumulate = 0;
};
std::optional<BatchPlan> planBatch(int64_t global, int64_t workers, int64_t batch0, int64_t acc0);

class TrainArgs {
 public:
  // `train`: the arguments after `-- train`. Checks what a launch needs
  // (--checkpoint-dir, --checkpoint-every: flags or its --config file's keys;
  // UsageError otherwise).
  explicit TrainArgs(std::vector<std::string> train);
  const std::string& checkpointDir() const { return dir_; }
  int64_t checkpointEvery() const { return every_; }
  // The user's per-rank batch and accumulation (flags, else the --config file's).
  int64_t batchSize() const { return batch0_; }
  int64_t accumulate() const { return acc0_; }
  // The global batch of `workers` workers at the user's batch and accumulation.
  void fixGlobalBatch(int64_t workers) { global_ = workers * batch0_ * acc0_; }
  int64_t globalBatch() const { return global_; }
  std::optional<BatchPlan> plan(int64_t workers) const { return planBatch(global_, workers, batch0_, acc0_); }
  // The plan for `workers`, or an Error saying the global batch cannot be kept.
  BatchPlan planOrThrow(int64_t workers) const;
  // The arguments of `dtrain train` on `workers` workers (without `train`).
  std::vector<std::string> forWorkers(int64_t workers) const;

 private:
  std::vector<std::string> train_;
  std::string dir_;
  int64_t every_ = 0, global_ = 0, batch0_ = 0, acc0_ = 0;
};

}  // namespace dtrain::cli::launch
