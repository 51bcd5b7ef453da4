#include "data/FiniteFeatures.h"

#include <algorithm>
#include <cmath>

#include "core/Error.h"

namespace dtrain::data {

std::string firstNonFiniteFeature(const Tensor& x) {
  if (x.dtype() != DType::F32 || x.numel() == 0) return "";
  const float* v = x.data<float>();
  const int64_t n = x.numel(), perSample = std::max<int64_t>(1, n / x.size(0));
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(v[i])) continue;
    const char* what = std::isnan(v[i]) ? "NaN" : v[i] > 0 ? "inf" : "-inf";
    return "sample " + std::to_string(i / perSample) + " holds " + what + " at feature " +
           std::to_string(i % perSample) + " (flat index " + std::to_string(i) + ")";
  }
  return "";
}

void requireFiniteFeatures(const Tensor& x, const std::string& who) {
  const std::string bad = firstNonFiniteFeature(x);
  DTRAIN_CHECK_USAGE(bad.empty(), who, ": ", bad, "; input features must be finite numbers");
}

}  // namespace dtrain::data
