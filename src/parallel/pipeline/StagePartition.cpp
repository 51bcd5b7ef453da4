#include "parallel/pipeline/StagePartition.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/Error.h"
#include "core/Memory.h"
#include "core/Timer.h"

namespace dtrain::parallel::pipeline {

using autograd::Variable;

std::vector<AnalyticLayer> profileLayers(const std::vector<nn::SequenceLayer>& layers, const Tensor& x) {
  std::vector<AnalyticLayer> out(layers.size());
  // The first pass warms caches and scratch buffers up; each layer keeps the
  // faster of the two timed ones (a preempted layer would skew the cut).
  for (int pass = 0; pass < 3; ++pass) {
    Tensor in = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      Variable input(in, i > 0);
      const int64_t before = memory::stats().currentBytes;
      Timer t;
      Variable y = layers[i].forward(input);
      const double forwardS = t.seconds();
      const int64_t held = memory::stats().currentBytes - before;
      Tensor seed = Tensor::full(y.shape(), 1.0f);
      t.reset();
      if (y.requiresGrad()) y.backward(seed);
      const double ms = 1e3 * (forwardS + t.seconds());
      out[i] = {pass < 2 ? ms : std::min(ms, out[i].ms), std::max<int64_t>(0, held), y.shape()};
      in = y.data();
    }
  }
  return out;
}

std::vector<int> balancedCuts(const std::vector<double>& cost, int stages) {
  const int n = static_cast<int>(cost.size());
  DTRAIN_CHECK(stages >= 1 && stages <= n, "balancedCuts: ", stages, " stages for ", n, " layers");
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  constexpr double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest largest stage cost of layers [0, i) in k stages;
  // from[k][i]: where the last of those stages starts.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        const double v = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (v < best[k][i]) {
          best[k][i] = v;
          from[k][i] = j;
        }
      }
  std::vector<int> cuts(stages);
  for (int k = stages, i = n; k >= 1; --k) {
    cuts[k - 1] = from[k][i];
    i = from[k][i];
  }
  return cuts;
}

std::vector<int> cutsFromSplit(const std::vector<int>& split, int layers, int stages,
                               const std::string& what) {
  DTRAIN_CHECK_USAGE(stages <= layers, what, " = ", stages, " stages: this model has only ",
                     layers, " layers to cut");
  if (split.empty()) return {};
  DTRAIN_CHECK_USAGE(static_cast<int>(split.size()) == stages - 1, "--pipeline-split needs ",
                     stages - 1, " cut points");
  std::vector<int> cuts{0};
  for (int c : split) {
    DTRAIN_CHECK_USAGE(c > cuts.back() && c < layers, "--pipeline-split: cut points must increase "
                       "within 1..", layers - 1, " (the model has ", layers, " layers)");
    cuts.push_back(c);
  }
  return cuts;
}

std::string describePlan(const std::vector<nn::SequenceLayer>& layers,
                         const std::vector<AnalyticLayer>& profile, const std::vector<int>& cuts,
                         bool byHand, int ranks) {
  std::ostringstream os;
  os << "pipeline plan (" << (byHand ? "--pipeline-split" : "balanced by measured time")
     << ", forward + backward of one micro-batch):";
  const int n = static_cast<int>(layers.size());
  for (size_t s = 0; s < cuts.size(); ++s) {
    const int end = stageEnd(cuts, static_cast<int>(s), n);
    double ms = 0;
    int64_t bytes = 0;
    for (int i = cuts[s]; i < end; ++i) {
      ms += profile[i].ms;
      bytes += profile[i].activationBytes;
    }
    os << "\n  stage " << s % ranks;
    if (static_cast<int>(cuts.size()) > ranks) os << " chunk " << s / ranks;
    os << ": layers " << cuts[s] << ".." << end - 1 << " ("
       << layers[cuts[s]].name << (end - 1 > cuts[s] ? " .. " + layers[end - 1].name : "")
       << "), " << ms << " ms, " << bytes / 1024 << " KiB activations";
  }
  return os.str();
}

}  // namespace dtrain::parallel::pipeline
