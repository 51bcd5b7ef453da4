#include "calibrate/Fit.h"

#include <algorithm>
#include <cmath>

#include "core/Error.h"

namespace dtrain::calibrate {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

AlphaBeta fitAlphaBeta(const std::vector<Sample>& samples) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  double minX = INFINITY, maxX = -INFINITY;
  const Sample* largest = nullptr;
  for (const Sample& s : samples) {
    DTRAIN_CHECK(s.seconds > 0 && std::isfinite(s.seconds) && s.bytes >= 0,
                 "alpha-beta fit: bad sample (", s.bytes, " bytes, ", s.seconds, " s)");
    const double w = 1.0 / (s.seconds * s.seconds);
    sw += w;
    sx += w * s.bytes;
    sy += w * s.seconds;
    sxx += w * s.bytes * s.bytes;
    sxy += w * s.bytes * s.seconds;
    minX = std::min(minX, s.bytes);
    maxX = std::max(maxX, s.bytes);
    if (!largest || s.bytes > largest->bytes) largest = &s;
  }
  DTRAIN_CHECK(samples.size() >= 2 && maxX > minX,
               "alpha-beta fit needs samples of at least 2 different sizes");
  const double det = sw * sxx - sx * sx;
  double slope = (sw * sxy - sx * sy) / det;
  double alpha = (sy - slope * sx) / sw;
  if (!(slope > 0) || !std::isfinite(slope)) {
    slope = largest->seconds / std::max(largest->bytes, 1.0);
    alpha = 0;
  } else if (alpha < 1e-9) {
    // Negative intercept: the best line through (near) the origin instead.
    slope = sxy / sxx;
    alpha = 0;
  }
  return {std::max(alpha, 1e-9), 1.0 / slope};
}

}  // namespace dtrain::calibrate
