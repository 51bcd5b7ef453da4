#include "plan/LossyCosts.h"

#include <cmath>
#include <functional>
#include <vector>

#include "api/StrategyRegistry.h"
#include "plan/costs/StrategyCost.h"

namespace dtrain::plan {

namespace {

const std::string kCompress4Hosts =
    " (mlp, 4 emulated hosts at 100 Mbit/s, 3 epochs; PERFORMANCE.md, \"every compressor\")";

// The compressors' (a strategy's own: plan/costs/StrategyCosts.cpp).
const std::vector<MeasuredCost>& compressorCosts() {
  static const std::vector<MeasuredCost> table{
      {[](const auto& c) { return c.compress == "fp16"; }, nullptr,
       "+0.03 accuracy points (0.8544 vs 0.8541)" + kCompress4Hosts +
           "; gpt-small: validation loss 0.003 nats lower after 250 steps"},
      {[](const auto& c) { return c.compress == "qsgd"; },
       [](const auto& c) { return c.compressBits == 4 ? std::string() : std::string("4 bits"); },
       "+0.13 accuracy points (0.8554 vs 0.8541)" + kCompress4Hosts +
           "; gpt-small (two-stage): validation loss 0.107 nats higher after 250 steps"},
      {[](const auto& c) { return c.compress == "topk"; },
       [](const auto& c) { return std::abs(c.compressRatio - 0.01) < 1e-12 ? std::string() : std::string("ratio 0.01"); },
       "-1.27 accuracy points (0.8414 vs 0.8541)" + kCompress4Hosts},
      {[](const auto& c) { return c.compress == "onebit"; }, nullptr,
       "-1.34 accuracy points (0.8407 vs 0.8541)" + kCompress4Hosts},
      {[](const auto& c) { return c.compress == "powersgd"; },
       [](const auto& c) { return c.compressRank == 2 ? std::string() : std::string("rank 2"); },
       "-0.37 accuracy points (0.8504 vs 0.8541)" + kCompress4Hosts +
           "; gpt-small at rank 4: validation loss 0.17 nats higher after 250 steps"},
  };
  return table;
}

}  // namespace

std::string MeasuredCost::describe(const runtime::TrainConfig& c) const {
  if (measured.empty() || (applies && !applies(c))) return "";
  const std::string other = otherSetting ? otherSetting(c) : std::string();
  return (other.empty() ? "measured: " : "measured at " + other + ": ") + measured;
}

std::string measuredAccuracyCost(const runtime::TrainConfig& c) {
  for (const MeasuredCost& e : compressorCosts())
    if (std::string cost = e.describe(c); !cost.empty()) return cost;
  return strategyCost(api::resolveStrategy(c)).measured.describe(c);
}

}  // namespace dtrain::plan
