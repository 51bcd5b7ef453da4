#include "api/PrepareConfig.h"

#include <algorithm>

#include "api/StrategyRegistry.h"
#include "core/Error.h"
#include "runtime/Task.h"

namespace dtrain::api {

std::string unusedBecause(const Option& o, const RunConfig& rc) {
  std::string why = strategyEntry(rc.train.strategy).refuses(o);
  if (why.empty() && o.unusedBecause) why = o.unusedBecause(rc);
  return why;
}

std::vector<std::pair<const Option*, Value>> usedValues(const RunConfig& rc) {
  std::vector<std::pair<const Option*, Value>> used;
  for (const Option& o : schema().options()) {
    if (!unusedBecause(o, rc).empty()) continue;
    if (auto v = o.get(rc)) used.emplace_back(&o, std::move(*v));
  }
  return used;
}

namespace {

// A validation message names flags ("--batch-size 12 is not divisible by
// --micro-batches 5"); when the first of them that was given came from a
// config file, the line also says where ("run.toml:3: [parallel] micro_batches: ...").
UsageError located(const UsageError& e, const Sources& src) {
  const std::string msg = e.what();
  for (auto start = msg.find("--"); start != std::string::npos; start = msg.find("--", start + 2)) {
    const auto end = msg.find_first_of(" ,:()'", start);
    const Option* o = schema().findFlag(msg.substr(start, end - start));
    if (!o || !src.given(*o)) continue;
    const std::string where = src.of(*o);
    if (where.rfind("--", 0) == 0) return e;  // given as a flag: the message says it already
    return UsageError(where + ": " + msg);
  }
  return e;
}

}  // namespace

void prepare(RunConfig& rc, const Sources& src, bool workersKnown) {
  runtime::TrainConfig& c = rc.train;
  // Defaults that depend on the model (gpt: text data, the peer's AdamW settings);
  // the model refuses what it cannot take ([model] n_layer for the mlp), located.
  try {
    runtime::applyTaskDefaults(c, [&src](const char* flag) { return src.givenFlag(flag); });
  } catch (const UsageError& e) {
    throw located(e, src);
  }
  // A pipeline or tensor-parallel group without --workers: one replica.
  if (!src.givenFlag("--workers")) c.workers = std::max(c.workers, c.pipelineStages * c.tensorParallel);
  c.strategy = resolveStrategy(c);
  strategyEntry(c.strategy);  // an unknown name is refused here
  for (const Option& o : schema().options()) {
    const std::string why = unusedBecause(o, rc);
    DTRAIN_CHECK_USAGE(why.empty() || !src.given(o), src.of(o), " ", why);
    // Values set in code (the library's users) are checked as flags are.
    if (const auto v = o.get(rc); v && why.empty()) {
      const std::string problem = checkValue(o, *v);
      DTRAIN_CHECK_USAGE(problem.empty(), describe(src.of(o), problem));
    }
  }
  try {
    validateRun(rc, workersKnown);
  } catch (const UsageError& e) {
    throw located(e, src);
  }
}

}  // namespace dtrain::api
