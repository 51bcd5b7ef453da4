#include "runtime/Task.h"

#include <algorithm>
#include <map>

#include "core/Error.h"
#include "data/KjvCorpus.h"
#include "runtime/LoraSetup.h"
#include "runtime/StreamingData.h"
#include "runtime/Trainer.h"

namespace dtrain::runtime {

namespace {

using Factory = std::unique_ptr<Task> (*)(const TaskContext&, const TaskData&);

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> f{
      {nn::kClassificationTask, makeClassificationTask},
      {nn::kLanguageModelTask, makeLanguageModelTask}};
  return f;
}

bool isLanguageModel(const nn::ModelInfo& info) { return info.task == nn::kLanguageModelTask; }

// The dataset must be one the model's task reads.
void checkDataset(const TrainConfig& c, const nn::ModelInfo& info) {
  DTRAIN_CHECK_USAGE(c.textFile.empty() || c.dataset == "text",
                     "--text-file applies to --dataset text");
  if (const StreamingDataset* streamed = streamingDataset(c.dataset)) {
    DTRAIN_CHECK_USAGE(info.task == streamed->task, "--dataset ", c.dataset, " trains ",
                       streamed->task, " models; --model ", c.model, " is a ", info.task, " model");
    streamed->check(c);
    return;
  }
  if (isLanguageModel(info))
    DTRAIN_CHECK_USAGE(c.dataset == "text", "--model ", c.model,
                       " is a language model: it trains on --dataset text (its default), not ",
                       c.dataset);
  else
    DTRAIN_CHECK_USAGE(c.dataset != "text", "--dataset text needs a language model (--model "
                       "gpt-tiny, gpt-small or gpt-base); --model ", c.model, " is a classifier");
  const std::pair<const char*, const std::string*> npyFlags[] = {
      {"--train-data", &c.trainData}, {"--train-labels", &c.trainLabels},
      {"--test-data", &c.testData}, {"--test-labels", &c.testLabels}};
  for (const auto& [flag, value] : npyFlags)
    DTRAIN_CHECK_USAGE(value->empty() || c.dataset == "npy", flag,
                       " applies to --dataset npy (got --dataset ", c.dataset, ")");
  if (c.dataset != "npy") return;
  DTRAIN_CHECK_USAGE(!c.trainData.empty() && !c.trainLabels.empty(),
                     "--dataset npy needs --train-data FEATURES.npy and --train-labels LABELS.npy");
  DTRAIN_CHECK_USAGE(c.testData.empty() == c.testLabels.empty(),
                     "--test-data and --test-labels go together (got only ",
                     c.testData.empty() ? "--test-labels" : "--test-data", ")");
}

}  // namespace

nn::ModelOverrides modelOverrides(const TrainConfig& c) {
  nn::ModelOverrides o{c.nLayer, c.nHead, c.nEmbd, c.blockSize,
                       std::vector<int64_t>(c.mlpHidden.begin(), c.mlpHidden.end())};
  return o;
}

namespace {
const std::pair<const char*, std::optional<int64_t> nn::ModelOverrides::*> kArchitectureKeys[] = {
    {"n_layer", &nn::ModelOverrides::nLayer},
    {"n_head", &nn::ModelOverrides::nHead},
    {"n_embd", &nn::ModelOverrides::nEmbd},
    {"block_size", &nn::ModelOverrides::blockSize}};
}  // namespace

std::map<std::string, std::string> modelMetadata(const TrainConfig& c) {
  std::map<std::string, std::string> m{{"model", c.model}};
  const nn::ModelOverrides o = modelOverrides(c);
  for (const auto& [key, member] : kArchitectureKeys)
    if (o.*member) m[key] = std::to_string(*(o.*member));
  if (!o.mlpHidden.empty()) {  // "2048,2048"
    std::string widths;
    for (int64_t h : o.mlpHidden) widths += (widths.empty() ? "" : ",") + std::to_string(h);
    m["mlp_hidden"] = widths;
  }
  m.merge(loraMetadata(c));  // LoRA runs: rank, alpha, targets (export --merge-lora reads them)
  return m;
}

nn::ModelOverrides overridesFromMetadata(const std::map<std::string, std::string>& m) {
  nn::ModelOverrides o;
  for (const auto& [key, member] : kArchitectureKeys) {
    auto it = m.find(key);
    if (it == m.end()) continue;
    try {
      o.*member = std::stoll(it->second);
    } catch (const std::exception&) {
      throw Error(dtrain::detail::concat("checkpoint metadata ", key, " = '", it->second,
                                         "' is not an integer"));
    }
  }
  if (auto it = m.find("mlp_hidden"); it != m.end()) {
    std::string rest = it->second;
    try {
      for (size_t at; !rest.empty(); rest = at == std::string::npos ? "" : rest.substr(at + 1)) {
        at = rest.find(',');
        o.mlpHidden.push_back(std::stoll(rest.substr(0, at)));
      }
    } catch (const std::exception&) {
      throw Error("checkpoint metadata mlp_hidden = '" + it->second + "' is not a list of widths");
    }
  }
  return o;
}

namespace {

// The metric --early-stop-patience watches must be one the task's evaluation reports.
void checkEarlyStopMetric(TrainConfig& c, bool languageModel) {
  if (c.earlyStopPatience == 0 || c.evalEvery == 0) return;  // the schema says what is missing
  const bool byDefault = c.earlyStopMetric.empty();
  if (byDefault) c.earlyStopMetric = "val_loss";
  const std::string& m = c.earlyStopMetric;
  const std::string named = byDefault ? "--early-stop-patience watches val_loss (the default "
                                        "--early-stop-metric)"
                                      : "--early-stop-metric " + m;
  if (languageModel) {
    DTRAIN_CHECK_USAGE(m == "val_loss" || m == "val_bpb", named,
                       ": the gpt-* models report val_loss and val_bpb");
    return;
  }
  DTRAIN_CHECK_USAGE(m != "val_bpb", named, ": val_bpb is the gpt-* models'; classifiers report "
                     "val_loss, val_accuracy (with --val-fraction), test_loss, test_accuracy");
  if (m.rfind("val_", 0) == 0)
    DTRAIN_CHECK_USAGE(c.valFraction.has_value(), named, ", which needs a validation split: add "
                       "--val-fraction F (e.g. 0.1), or watch --early-stop-metric test_loss");
  else
    DTRAIN_CHECK_USAGE(c.dataset == "memory" || hasTestSet(c), named,
                       ", but there is no test set: give --test-data and --test-labels, or "
                       "--val-fraction F and --early-stop-metric val_loss");
}

}  // namespace

TaskData loadTaskData(const TrainConfig& c, bool withTest) {
  TaskData d;
  if (isLanguageModel(nn::modelInfo(c.model, modelOverrides(c)))) {
    d.text = data::loadTextCorpus(c.textFile);
    return d;
  }
  if (const StreamingDataset* streamed = streamingDataset(c.dataset)) {
    streamed->load(c, withTest, d);
    return d;
  }
  d.train = loadDataset(c, true);
  if (withTest) d.test = loadTestDataset(c, *d.train);
  return d;
}

std::unique_ptr<Task> makeTask(const TaskContext& context, const TaskData& data) {
  checkDataset(context.config, context.model);
  if (const StreamingDataset* streamed = streamingDataset(context.config.dataset))
    return streamed->makeTask(context, data);
  auto it = factories().find(context.model.task);
  DTRAIN_CHECK(it != factories().end(), "no task '", context.model.task, "' for --model ",
               context.config.model);
  return it->second(context, data);
}

void applyTaskDefaults(TrainConfig& c, const std::function<bool(const char*)>& given) {
  const nn::ModelInfo info = nn::modelInfo(c.model, modelOverrides(c));
  // --max-steps N alone trains N steps, crossing epochs as needed (what Lightning's and
  // PyTorch's users mean): N epochs bound it no sooner, an epoch being >= 1 step. With
  // --epochs as well, whichever ends first.
  if (!given("--epochs") && c.maxSteps > 0) c.epochs = std::max(c.epochs, c.maxSteps);
  if (isLanguageModel(info)) {
    // The peer's settings (../shared/bench/torch_gpt.py, nanoGPT's AdamW groups).
    if (!given("--dataset")) c.dataset = "text";
    if (!given("--optimizer")) c.optimizer = "adamw";
    if (!given("--lr")) c.lr = 1e-3;
    if (!given("--weight-decay")) c.weightDecay = 0.1;
    if (!given("--batch-size")) c.batchSize = 16;
    // Parameter servers cannot clip by the global norm yet (TrainConfig.cpp).
    if (!given("--clip-grad-norm") && c.strategy != "ps") c.clipGradNorm = 1.0;
    if (!given("--decay-2d-only")) c.decay2dOnly = true;
    if (!given("--adam-betas") && (c.optimizer == "adam" || c.optimizer == "adamw")) {
      c.beta1 = 0.9;
      c.beta2 = 0.95;
    }
  }
  checkDataset(c, info);
  checkEarlyStopMetric(c, isLanguageModel(info));
}

}  // namespace dtrain::runtime
