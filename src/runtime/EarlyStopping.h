#pragma once
// Early stopping (--early-stop-patience P, --early-stop-metric M): training ends
// once P evaluations in a row have not improved M on its best. Decided on the
// reporter, which evaluates; the trainer tells every rank (Strategy::anyRankStops).
// The count survives a checkpoint (its metadata), so a resumed run goes on
// counting and a run that stopped early resumes as stopped.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain::runtime {

// The metrics early stopping may watch, and whether lower is better.
struct EarlyStopMetric {
  std::string name;
  bool lowerIsBetter = true;
};
const std::vector<EarlyStopMetric>& earlyStopMetrics();
std::vector<std::string> earlyStopMetricNames();

class EarlyStopping {
 public:
  EarlyStopping(std::string metric, int64_t patience);
  bool active() const { return patience_ > 0; }
  // One evaluation's fields at `step`: true when training should stop now.
  bool observe(const nlohmann::json& fields, int64_t step);
  bool stopped() const { return stoppedAt_.has_value(); }
  std::optional<int64_t> stoppedAt() const { return stoppedAt_; }
  // "stopped early at step 600: val_loss has not improved on 0.41 (step 300) for 3 evaluations"
  std::string describeStop() const;
  // best_step, best_<metric>, stopped_early: for the final line.
  nlohmann::json resultFields() const;
  // As checkpoint metadata ("early_stop.*") and back.
  void writeTo(std::map<std::string, std::string>& metadata) const;
  void readFrom(const std::map<std::string, std::string>& metadata);

 private:
  std::string metric_;
  bool lowerIsBetter_ = true;
  int64_t patience_ = 0;
  std::optional<double> best_;
  int64_t bestStep_ = 0;
  int64_t evalsSinceBest_ = 0;
  std::optional<int64_t> stoppedAt_;
};

}  // namespace dtrain::runtime
