#include "runtime/EarlyStopping.h"

#include "core/Error.h"

namespace dtrain::runtime {

const std::vector<EarlyStopMetric>& earlyStopMetrics() {
  static const std::vector<EarlyStopMetric> metrics{{"val_loss", true},
                                                    {"val_accuracy", false},
                                                    {"val_bpb", true},
                                                    {"test_loss", true},
                                                    {"test_accuracy", false}};
  return metrics;
}

std::vector<std::string> earlyStopMetricNames() {
  std::vector<std::string> names;
  for (const auto& m : earlyStopMetrics()) names.push_back(m.name);
  return names;
}

EarlyStopping::EarlyStopping(std::string metric, int64_t patience)
    : metric_(std::move(metric)), patience_(patience) {
  if (!active()) return;
  for (const auto& m : earlyStopMetrics())
    if (m.name == metric_) lowerIsBetter_ = m.lowerIsBetter;
}

bool EarlyStopping::observe(const nlohmann::json& fields, int64_t step) {
  if (!active() || stopped()) return stopped();
  DTRAIN_CHECK(fields.contains(metric_), "--early-stop-metric ", metric_,
               ": the evaluation reports no such field (", fields.dump(), ")");
  const double value = fields.at(metric_).get<double>();
  const bool better = !best_ || (lowerIsBetter_ ? value < *best_ : value > *best_);
  if (better) {
    best_ = value;
    bestStep_ = step;
    evalsSinceBest_ = 0;
  } else if (++evalsSinceBest_ >= patience_) {
    stoppedAt_ = step;
  }
  return stopped();
}

std::string EarlyStopping::describeStop() const {
  return detail::concat("stopped early at step ", stoppedAt_.value_or(0), ": ", metric_,
                        " has not improved on ", best_.value_or(0), " (step ", bestStep_, ") for ",
                        evalsSinceBest_, evalsSinceBest_ == 1 ? " evaluation" : " evaluations");
}

nlohmann::json EarlyStopping::resultFields() const {
  nlohmann::json j = nlohmann::json::object();
  if (!active()) return j;
  j["stopped_early"] = stopped();
  j["early_stop_metric"] = metric_;
  if (best_) {
    j["best_step"] = bestStep_;
    j["best_" + metric_] = *best_;
  }
  return j;
}

void EarlyStopping::writeTo(std::map<std::string, std::string>& m) const {
  if (!active() || !best_) return;
  m["early_stop.metric"] = metric_;
  m["early_stop.best"] = nlohmann::json(*best_).dump();  // round-trips
  m["early_stop.best_step"] = std::to_string(bestStep_);
  m["early_stop.evals_since_best"] = std::to_string(evalsSinceBest_);
  if (stoppedAt_) m["early_stop.stopped_at"] = std::to_string(*stoppedAt_);
}

void EarlyStopping::readFrom(const std::map<std::string, std::string>& m) {
  // A checkpoint of another metric (or none) starts the count afresh.
  auto it = m.find("early_stop.metric");
  if (!active() || it == m.end() || it->second != metric_) return;
  try {
    best_ = std::stod(m.at("early_stop.best"));
    bestStep_ = std::stoll(m.at("early_stop.best_step"));
    evalsSinceBest_ = std::stoll(m.at("early_stop.evals_since_best"));
    if (auto s = m.find("early_stop.stopped_at"); s != m.end()) stoppedAt_ = std::stoll(s->second);
  } catch (const std::exception&) {
    throw Error("checkpoint metadata early_stop.* is not what dtrain writes");
  }
}

}  // namespace dtrain::runtime
