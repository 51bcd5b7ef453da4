#include "cli/RunSummary.h"

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

namespace dtrain::cli {

namespace {

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

double number(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

// The task's headline figures: a classifier's test accuracy, a language model's
// validation loss (none without a test set).
std::string evaluation(const nlohmann::json& r) {
  std::string out;
  if (r.contains("val_accuracy"))  // --val-fraction
    out = "; val accuracy " + fixed(number(r, "val_accuracy"), 4) + " (loss " +
          fixed(number(r, "val_loss"), 4) + ")";
  else if (r.contains("val_loss"))
    out = "; validation loss " + fixed(number(r, "val_loss"), 4);
  if (r.contains("test_accuracy"))
    out += "; test accuracy " + fixed(number(r, "test_accuracy"), 4) + " (loss " +
           fixed(number(r, "test_loss"), 4) + ")";
  return out;
}

// --early-stop-patience: whether it stopped, and where the best evaluation was.
std::string earlyStop(const nlohmann::json& r) {
  if (!r.value("stopped_early", false)) return "";
  return "; stopped early, best at step " + std::to_string(r.value("best_step", int64_t{0}));
}

// Where the run's files went, from its configuration.
std::string outputs(const nlohmann::json& r) {
  const std::vector<std::pair<const char*, const char*>> files{
      {"save", "saved "}, {"dir", "checkpoints in "}, {"metrics", "metrics "}, {"timeline", "timeline "}};
  std::string out;
  if (!r.contains("config")) return out;
  for (const auto& [key, label] : files)
    for (const char* group : {"checkpoint", "logging"})
      if (r["config"].contains(group) && r["config"][group].contains(key))
        out += std::string("; ") + label + r["config"][group][key].get<std::string>();
  return out;
}

}  // namespace

std::string runSummary(const nlohmann::json& r) {
  const std::string model = r.contains("model") ? r["model"].get<std::string>() + ", " : "";
  const int64_t steps = r.value("steps", int64_t{0}), epochs = r.value("epochs_completed", int64_t{0});
  return "dtrain: " + model + std::to_string(steps) + (steps == 1 ? " step (" : " steps (") +
         std::to_string(epochs) + (epochs == 1 ? " epoch) in " : " epochs) in ") + fixed(number(r, "seconds"), 1) +
         " s, " + fixed(number(r, "samples_per_s"), 0) + " samples/s" + evaluation(r) + earlyStop(r) + outputs(r);
}

}  // namespace dtrain::cli
