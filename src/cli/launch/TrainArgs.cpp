#include "cli/launch/TrainArgs.h"

#include <filesystem>

#include "api/ConfigFile.h"
#include "api/RunConfig.h"
#include "api/Schema.h"
#include "core/Error.h"

namespace dtrain::cli::launch {

std::optional<std::string> flagValue(const std::vector<std::string>& args, const std::string& name) {
  std::optional<std::string> v;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) v = args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) v = args[i].substr(name.size() + 1);
  }
  return v;
}

std::vector<std::string> dropFlag(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind(name + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int64_t intFlag(const std::vector<std::string>& args, const std::string& name, int64_t fallback) {
  const auto v = flagValue(args, name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long long n = std::stoll(*v, &used);
    DTRAIN_CHECK_USAGE(used == v->size() && n >= 0, "launch: ", name, " takes a number (got '", *v, "')");
    return n;
  } catch (const std::logic_error&) {
    throw UsageError("launch: " + name + " takes a number (got '" + *v + "')");
  }
}

std::optional<BatchPlan> planBatch(int64_t global, int64_t workers, int64_t batch0, int64_t acc0) {
  if (global % (workers * acc0) == 0) return BatchPlan{global / (workers * acc0), acc0};
  if (global % (workers * batch0) == 0) return BatchPlan{batch0, global / (workers * batch0)};
  return std::nullopt;
}

TrainArgs::TrainArgs(std::vector<std::string> train) {
  DTRAIN_CHECK_USAGE(!train.empty() && train[0] == "train",
                     "launch needs the train command after '--' (dtrain launch ... -- train ARGS...)");
  train_.assign(train.begin() + 1, train.end());
  // A --config file gives what its flags do not (flags override it, as in train);
  // its path made absolute, for ranks started elsewhere.
  api::RunConfig file;
  if (const auto config = flagValue(train_, "--config")) {
    api::Sources unused;
    api::loadConfigFile(*config, file, unused);  // a bad file is refused here, at once
    train_ = dropFlag(train_, "--config");
    train_.insert(train_.begin(), {"--config", std::filesystem::absolute(*config).string()});
  }
  const auto dir = flagValue(train_, "--checkpoint-dir");
  dir_ = dir ? *dir : file.train.checkpointDir;
  DTRAIN_CHECK_USAGE(!dir_.empty(), "launch needs --checkpoint-dir D in the train arguments or "
                     "[checkpoint] dir in its --config (restarts resume from it)");
  every_ = intFlag(train_, "--checkpoint-every", file.train.checkpointEvery);
  DTRAIN_CHECK_USAGE(every_ > 0, "launch needs --checkpoint-every N (N > 0) in the train arguments "
                     "or [checkpoint] every in its --config");
  batch0_ = intFlag(train_, "--batch-size", file.train.batchSize);
  acc0_ = intFlag(train_, "--accumulate", file.train.accumulate);
}

BatchPlan TrainArgs::planOrThrow(int64_t workers) const {
  const auto p = plan(workers);
  if (!p)
    throw Error("launch: " + std::to_string(workers) + " workers cannot keep the global batch of " +
                std::to_string(global_) + " (neither --batch-size nor --accumulate divides it)");
  return *p;
}

std::vector<std::string> TrainArgs::forWorkers(int64_t workers) const {
  std::vector<std::string> args = train_;
  for (const char* name : {"--workers", "--backend", "--resume", "--batch-size", "--accumulate"})
    args = dropFlag(args, name);
  const BatchPlan p = planOrThrow(workers);
  for (const std::string s : {"--backend", "mpi", "--resume", "auto"}) args.push_back(s);
  args.insert(args.end(), {"--workers", std::to_string(workers), "--batch-size", std::to_string(p.batch)});
  // (the user's accumulation, from a flag or the file, is replaced by the plan's)
  if (p.accumulate != 1 || acc0_ != 1 || flagValue(train_, "--accumulate"))
    args.insert(args.end(), {"--accumulate", std::to_string(p.accumulate)});
  return args;
}

}  // namespace dtrain::cli::launch
