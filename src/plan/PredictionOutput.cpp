#include "plan/PredictionOutput.h"

#include <cmath>

#include "parallel/SpanRecorder.h"
#include "runtime/Timeline.h"

namespace dtrain::plan {

nlohmann::json predictionJson(const Prediction& p) {
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& m : p.memory)
    memory.push_back({{"parameters", std::llround(m.parameters)},
                      {"gradients", std::llround(m.gradients)},
                      {"optimizer_state", std::llround(m.optimizerState)},
                      {"activations_peak", std::llround(m.activationsPeak)},
                      {"peak", std::llround(m.peak)},
                      {"offloaded", std::llround(m.offloaded)}});
  const Layout& l = p.layout;
  nlohmann::json terms = nlohmann::json::object();
  for (const auto& [name, seconds] : p.terms) terms[name] = seconds;
  return {{"predicted", true},
          {"strategy", l.strategy},
          {"workers", l.ranks},
          {"mesh", {{"dp", l.dp}, {"pp", l.pp}, {"tp", l.tp}}},
          {"samples_per_s", p.samplesPerS},
          {"step_s", p.stepS},
          {"compute_s", p.computeS},
          {"exposed_comm_s", p.exposedCommS},
          {"comm_s", p.commS},
          {"bubble_s", p.bubbleS},
          {"optimizer_s", p.optimizerS},
          {"dominant", p.dominant},
          {"terms_s", terms},
          {"samples_per_step", l.cost->hasServers ? -1 : l.samplesPerStep},
          {"bytes_per_rank", p.bytesPerRank},
          {"memory_per_rank", memory}};
}

void writePredictedTimeline(const std::string& path, const Prediction& p) {
  runtime::Timeline t;
  using parallel::Lane;
  const double us = 1e6;
  double end = 0;
  if (!p.spans.empty()) {
    for (const auto& s : p.spans) {
      t.add(s.rank, s.lane == 0 ? Lane::Compute : Lane::Comm, s.name, s.category, s.startUs, s.startUs + s.durUs);
      end = std::max(end, s.startUs + s.durUs);
    }
  } else {
    // One rank's step: forward, backward (the allreduce overlapping its end), optimizer.
    const double micro = p.computeS / std::max<int64_t>(1, p.layout.microBatches) * us;
    for (int64_t i = 0; i < p.layout.microBatches; ++i) {
      t.add(0, Lane::Compute, "forward", "compute", end, end + micro / 3);
      t.add(0, Lane::Compute, "backward", "compute", end + micro / 3, end + micro);
      end += micro;
    }
  }
  const double hidden = (p.commS - p.exposedCommS) * us;
  if (p.commS > 0) t.add(0, Lane::Comm, "allreduce", "comm", end - hidden, end - hidden + p.commS * us);
  end += p.exposedCommS * us;
  t.add(0, Lane::Compute, "optimizer", "compute", end, end + p.optimizerS * us);
  t.write(path);
}

}  // namespace dtrain::plan
