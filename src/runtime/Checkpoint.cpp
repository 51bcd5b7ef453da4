#include "runtime/Checkpoint.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>
#include <unordered_map>

#include "runtime/Safetensors.h"

namespace dtrain::runtime {

using dtrain::detail::concat;

namespace {

const std::string kOptimizerPrefix = "optimizer.";
const std::string kStrategyPrefix = "strategy.";
const std::string kReservedPrefix = "dtrain.";
const std::string kFormatKey = "dtrain.format";
const std::string kStepKey = "dtrain.step";
const std::string kEpochKey = "dtrain.epoch";
const std::string kRngKey = "dtrain.rng";
const std::string kWorldSizeKey = "dtrain.world_size";
const std::string kGlobalBatchKey = "dtrain.global_batch";
const std::string kOptimizerKey = "dtrain.optimizer";
const std::string kOptimizerStepKey = "dtrain.optimizer.step";
const std::string kOptimizerLrKey = "dtrain.optimizer.lr";

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// RNG words as 16 hex digits each, comma-separated: exact and readable.
std::string rngToString(const Rng::State& s) {
  std::string out;
  char buf[17];
  for (uint64_t w : s) {
    std::snprintf(buf, sizeof buf, "%016" PRIx64, w);
    out += (out.empty() ? "" : ",") + std::string(buf);
  }
  return out;
}

int64_t parseInt(const std::string& path, const std::string& key, const std::string& v) {
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  DTRAIN_CHECK(ec == std::errc() && end == v.data() + v.size() && x >= 0, "checkpoint ", path,
               ": metadata ", key, " = '", v, "' is not a non-negative integer");
  return x;
}

Rng::State parseRng(const std::string& path, const std::string& v) {
  Rng::State s{};
  const char* p = v.data();
  const char* end = v.data() + v.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0) {
      DTRAIN_CHECK(p < end && *p == ',', "checkpoint ", path, ": metadata ", kRngKey, " = '", v,
                   "' is not 4 comma-separated hex words");
      ++p;
    }
    auto [next, ec] = std::from_chars(p, end, s[i], 16);
    DTRAIN_CHECK(ec == std::errc() && next - p == 16, "checkpoint ", path, ": metadata ", kRngKey,
                 " = '", v, "' is not 4 comma-separated hex words");
    p = next;
  }
  DTRAIN_CHECK(p == end, "checkpoint ", path, ": metadata ", kRngKey, " = '", v,
               "' is not 4 comma-separated hex words");
  return s;
}

// Collects every problem so one error lists them all (a wrong --model usually
// breaks many tensors at once, and the first alone can mislead).
class Problems {
 public:
  explicit Problems(std::string path) : path_(std::move(path)) {}
  template <typename... Args>
  void add(const Args&... args) {
    list_.push_back(concat(args...));
  }
  void throwIfAny() const {
    if (list_.empty()) return;
    constexpr size_t kShown = 8;
    std::string msg = "checkpoint " + path_ + ": " + list_[0];
    for (size_t i = 1; i < list_.size() && i < kShown; ++i) msg += "; " + list_[i];
    if (list_.size() > kShown) msg += concat("; and ", list_.size() - kShown, " more problems");
    throw Error(msg);
  }

 private:
  std::string path_;
  std::vector<std::string> list_;
};

// Checks that file tensor `t` (a `kind` called `name`) can be copied into a
// tensor of `shape` and `dtype` that `owner` ("model", "optimizer") holds.
void checkMatch(Problems& problems, const char* kind, const std::string& name, const Tensor& t,
                const Shape& shape, DType dtype, const char* owner) {
  if (t.shape() != shape)
    problems.add(kind, " ", name, " has shape ", shapeStr(t.shape()), ", ", owner, " expects ",
                 shapeStr(shape));
  else if (t.dtype() != dtype)
    problems.add(kind, " ", name, " has dtype ", dtypeName(t.dtype()), ", ", owner, " expects ",
                 dtypeName(dtype));
}

}  // namespace

void saveCheckpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer,
                    const TrainState& state) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, v] : model.namedParameters()) tensors.emplace_back(name, v.data());
  for (auto& [name, t] : model.namedBuffers()) tensors.emplace_back(name, *t);
  // Tied weights under both names, as torch's state_dict() lists them.
  const size_t own = tensors.size();
  for (const auto& [alias, target] : model.parameterAliases())
    for (size_t i = 0; i < own; ++i)
      if (tensors[i].first == target) tensors.emplace_back(alias, tensors[i].second);
  for (const auto& [name, t] : tensors)
    for (const auto& prefix : {kOptimizerPrefix, kStrategyPrefix})
      DTRAIN_CHECK(!startsWith(name, prefix), "saving checkpoint ", path, ": model tensor ", name,
                   " clashes with the reserved '", prefix, "' prefix");
  for (const auto& [name, t] : state.strategyState) tensors.emplace_back(kStrategyPrefix + name, t);

  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : state.metadata) {
    DTRAIN_CHECK(!startsWith(k, kReservedPrefix), "saving checkpoint ", path, ": metadata key '",
                 k, "' uses the reserved prefix '", kReservedPrefix, "'");
    meta[k] = v;
  }
  meta[kFormatKey] = "1";
  meta[kStepKey] = std::to_string(state.step);
  meta[kEpochKey] = std::to_string(state.epoch);
  meta[kRngKey] = rngToString(state.rng);
  if (state.worldSize > 0) meta[kWorldSizeKey] = std::to_string(state.worldSize);
  if (state.globalBatch > 0) meta[kGlobalBatchKey] = std::to_string(state.globalBatch);
  if (optimizer) {
    for (auto& [name, t] : optimizer->namedState()) tensors.emplace_back(kOptimizerPrefix + name, *t);
    for (auto& [key, t] : optimizer->globalState()) tensors.emplace_back(kOptimizerPrefix + key, t);
    meta[kOptimizerKey] = optimizer->name();
    meta[kOptimizerStepKey] = std::to_string(optimizer->stepCount());
    // Informational: the run's flags or schedule decide the lr on resume.
    meta[kOptimizerLrKey] = concat(optimizer->lr());
  }
  saveSafetensors(path, tensors, meta);
}

CheckpointInfo loadCheckpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer* optimizer, TrainState* state) {
  return loadCheckpoint(loadSafetensors(path), path, model, optimizer, state);
}

CheckpointInfo loadCheckpoint(const SafetensorsFile& file, const std::string& path,
                              nn::Module& model, optim::Optimizer* optimizer, TrainState* state) {
  Problems problems(path);

  std::unordered_map<std::string, const Tensor*> modelKeys, optimizerKeys;
  std::map<std::string, Tensor> strategyState;  // shares the file's storage
  std::map<std::string, Tensor> optimizerGlobal;  // "optimizer.<name>@..." (Optimizer::globalState)
  for (const auto& [name, t] : file.tensors) {
    if (startsWith(name, kStrategyPrefix))
      strategyState.emplace(name.substr(kStrategyPrefix.size()), t);
    else if (startsWith(name, kOptimizerPrefix) && name.find('@') != std::string::npos)
      optimizerGlobal.emplace(name.substr(kOptimizerPrefix.size()), t);
    else
      (startsWith(name, kOptimizerPrefix) ? optimizerKeys : modelKeys)[name] = &t;
  }

  // ---- validate the model part ----
  struct Copy {
    Tensor* into;
    const Tensor* from;
  };
  std::vector<Copy> copies;
  std::set<std::string> used;
  auto expect = [&](const char* kind, const std::string& name, Tensor& into) {
    auto it = modelKeys.find(name);
    if (it == modelKeys.end()) {
      problems.add("missing ", kind, " ", name);
      return;
    }
    used.insert(name);
    checkMatch(problems, kind, name, *it->second, into.shape(), into.dtype(), "model");
    copies.push_back({&into, it->second});
  };
  auto params = model.namedParameters();
  for (auto& [name, v] : params) expect("parameter", name, v.data());
  for (auto& [name, t] : model.namedBuffers()) expect("buffer", name, *t);
  // A tied alias (GPT's lm_head.weight) is optional: files from torch have it,
  // others may not; when present it must be the very tensor it aliases.
  for (const auto& [alias, target] : model.parameterAliases()) {
    auto a = modelKeys.find(alias);
    auto t = modelKeys.find(target);
    if (a == modelKeys.end()) continue;
    used.insert(alias);
    if (t == modelKeys.end()) continue;  // reported as a missing parameter
    const Tensor& x = *a->second;
    const Tensor& y = *t->second;
    if (x.shape() != y.shape() || x.dtype() != y.dtype() ||
        std::memcmp(x.contiguous().rawData(), y.contiguous().rawData(), x.nbytes()) != 0)
      problems.add("tied tensor ", alias, " differs from ", target,
                   " (they are one parameter of the model)");
  }
  for (const auto& [name, t] : file.tensors)
    if (!startsWith(name, kOptimizerPrefix) && !startsWith(name, kStrategyPrefix) && !used.count(name))
      problems.add("unexpected tensor ", name, " (the model has no parameter or buffer of that name)");

  // ---- validate the optimizer part ----
  CheckpointInfo info;
  auto savedOpt = file.metadata.find(kOptimizerKey);
  if (savedOpt != file.metadata.end()) info.optimizerName = savedOpt->second;
  info.hasOptimizerState = !optimizerKeys.empty() || !optimizerGlobal.empty();
  std::vector<size_t> withState;
  std::vector<std::pair<std::string, const Tensor*>> optCopies;  // "<param>.<slot>" -> file tensor
  int64_t optStep = 0;
  if (optimizer && info.hasOptimizerState) {
    if (!info.optimizerName.empty() && info.optimizerName != optimizer->name()) {
      problems.add("it holds state of optimizer ", info.optimizerName, ", but this run uses ",
                   optimizer->name());
    } else {
      std::set<std::string> matched;
      const auto slots = optimizer->slotNames();
      for (size_t i = 0; i < optimizer->size(); ++i) {
        const std::string& p = optimizer->paramName(i);
        const Shape& pshape = optimizer->param(i).data().shape();
        std::vector<std::string> present, absent;
        std::vector<std::tuple<std::string, Shape, DType>> want{{"step", Shape{1}, DType::I64}};
        for (const auto& s : slots) want.emplace_back(s, pshape, DType::F32);
        for (const auto& [slot, shape, dtype] : want) {
          const std::string key = kOptimizerPrefix + p + "." + slot;
          auto it = optimizerKeys.find(key);
          if (it == optimizerKeys.end()) {
            absent.push_back(key);
            continue;
          }
          present.push_back(key);
          matched.insert(key);
          checkMatch(problems, "optimizer state", key, *it->second, shape, dtype, "optimizer");
          optCopies.emplace_back(p + "." + slot, it->second);
        }
        // A parameter's state is all there (it was updated) or all absent (it
        // never was); anything in between is a damaged or foreign file.
        if (!present.empty() && !absent.empty())
          problems.add("missing optimizer state ", absent[0], " (", present[0], " is present)");
        if (!present.empty()) withState.push_back(i);
      }
      for (const auto& [key, t] : optimizerKeys)
        if (!matched.count(key))
          problems.add("unexpected optimizer state ", key, " (not a state of this ",
                       optimizer->describe(), ")");
      for (const std::string& p : optimizer->checkGlobalState(optimizerGlobal)) problems.add(p);
    }
    auto it = file.metadata.find(kOptimizerStepKey);
    if (it != file.metadata.end()) optStep = parseInt(path, kOptimizerStepKey, it->second);
  }

  // ---- validate the training state ----
  TrainState loaded;
  info.hasTrainState = file.metadata.count(kStepKey) > 0;
  if (info.hasTrainState) {
    loaded.step = parseInt(path, kStepKey, file.metadata.at(kStepKey));
    auto e = file.metadata.find(kEpochKey);
    if (e != file.metadata.end()) loaded.epoch = parseInt(path, kEpochKey, e->second);
    for (auto [key, field] : {std::pair{&kWorldSizeKey, &loaded.worldSize},
                              std::pair{&kGlobalBatchKey, &loaded.globalBatch}})
      if (auto it = file.metadata.find(*key); it != file.metadata.end())
        *field = parseInt(path, *key, it->second);
    auto r = file.metadata.find(kRngKey);
    if (r != file.metadata.end())
      loaded.rng = parseRng(path, r->second);
    else if (state)
      loaded.rng = state->rng;
  } else if (state) {
    loaded.rng = state->rng;  // a bare state_dict: keep the run's seeded RNG
  }
  for (const auto& [k, v] : file.metadata)
    if (!startsWith(k, kReservedPrefix)) loaded.metadata[k] = v;
  loaded.strategyState = std::move(strategyState);

  problems.throwIfAny();

  // ---- apply: nothing below can fail on the file's contents ----
  for (const Copy& c : copies) c.into->copyFrom(*c.from);
  if (optimizer) {
    optimizer->resetState();
    optimizer->ensureState(withState);
    std::unordered_map<std::string, Tensor*> slots;
    for (auto& [name, t] : optimizer->namedState()) slots[name] = t;
    for (const auto& [name, from] : optCopies) slots.at(name)->copyFrom(*from);
    optimizer->setStepCount(info.hasOptimizerState ? optStep : 0);
    optimizer->setGlobalState(info.hasOptimizerState ? optimizerGlobal : std::map<std::string, Tensor>{});
  }
  if (state) *state = std::move(loaded);
  return info;
}

}  // namespace dtrain::runtime
