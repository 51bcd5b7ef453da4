#include "cli/PredictionDrift.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace dtrain::cli {

namespace {

// A phase the result line measures (ms per step) beside the prediction's term
// for it, and what a drift there suggests.
struct Phase {
  const char* name;
  const char* measuredKey;
  double plan::Prediction::*predictedS;
  const char* slower;  // what measuring more than predicted suggests
  const char* faster;
};

const Phase kPhases[] = {
    {"compute", "compute_ms", &plan::Prediction::computeS,
     "is this CPU slower or busier than calibrated, or its thread count different?",
     "is this CPU faster than the one calibrated, or was it busy while calibrating?"},
    {"exposed communication", "exposed_comm_ms", &plan::Prediction::exposedCommS,
     "is the network slower than calibrated, or shared?",
     "is the network faster than calibrated, or more of it hidden behind compute?"},
};

// The measured step from the result's totals (every strategy reports them).
double measuredStepMs(const nlohmann::json& r) {
  if (!r.contains("seconds") || !r.contains("steps") || r["steps"].get<double>() <= 0) return NAN;
  return r["seconds"].get<double>() / r["steps"].get<double>() * 1000;
}

}  // namespace

void compareWithPrediction(nlohmann::json& result, const plan::Prediction& predicted) {
  struct Row {
    std::string phase;
    double measuredMs, predictedMs;
    const char *slower, *faster;
  };
  std::vector<Row> rows;
  for (const Phase& p : kPhases)
    if (result.contains(p.measuredKey) && result[p.measuredKey].is_number())
      rows.push_back({p.name, result[p.measuredKey].get<double>(), predicted.*p.predictedS * 1000, p.slower,
                      p.faster});
  const char* whole = "the phases say where; start-up and evaluations count in the step too";
  rows.push_back({"step", measuredStepMs(result), predicted.stepS * 1000, whole, whole});
  nlohmann::json phases = nlohmann::json::object(), drift = nlohmann::json::array();
  std::vector<std::pair<double, const Row*>> off;
  for (const Row& r : rows) {
    if (!std::isfinite(r.measuredMs) || r.predictedMs <= 0) continue;
    const double ratio = r.measuredMs / r.predictedMs;
    phases[r.phase] = {{"measured_ms", r.measuredMs}, {"predicted_ms", r.predictedMs}, {"ratio", ratio}};
    if (std::abs(ratio - 1) > kDriftShare) off.push_back({std::abs(std::log(ratio)), &r});
  }
  std::sort(off.begin(), off.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [size, r] : off) {
    const double ratio = r->measuredMs / r->predictedMs;
    drift.push_back({{"phase", r->phase}, {"ratio", ratio}});
    std::fprintf(stderr, "dtrain: drift: %s %.2fx the prediction (%.3g ms measured, %.3g ms predicted per step): %s\n",
                 r->phase.c_str(), ratio, r->measuredMs, r->predictedMs, ratio > 1 ? r->slower : r->faster);
  }
  result["predicted_phases"] = std::move(phases);
  result["drift"] = std::move(drift);
}

}  // namespace dtrain::cli
