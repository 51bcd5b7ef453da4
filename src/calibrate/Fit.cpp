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
  std::vector<Sample> sorted = samples;
  std::sort(sorted.begin(), sorted.end(), [](const Sample& a, const Sample& b) { return a.bytes < b.bytes; });
  for (const Sample& s : sorted)
    DTRAIN_CHECK(s.seconds > 0 && std::isfinite(s.seconds) && s.bytes >= 0,
                 "alpha-beta fit: bad sample (", s.bytes, " bytes, ", s.seconds, " s)");
  DTRAIN_CHECK(sorted.size() >= 2 && sorted.back().bytes > sorted.front().bytes,
               "alpha-beta fit needs samples of at least 2 different sizes");
  // The slope: least squares over the larger half (at least 2 samples, 2 sizes).
  size_t first = sorted.size() - std::max<size_t>(2, sorted.size() / 2);
  while (first > 0 && sorted[first].bytes == sorted.back().bytes) --first;
  double mx = 0, my = 0;
  const double k = static_cast<double>(sorted.size() - first);
  for (size_t i = first; i < sorted.size(); ++i) {
    mx += sorted[i].bytes / k;
    my += sorted[i].seconds / k;
  }
  double sxy = 0, sxx = 0;
  for (size_t i = first; i < sorted.size(); ++i) {
    sxy += (sorted[i].bytes - mx) * (sorted[i].seconds - my);
    sxx += (sorted[i].bytes - mx) * (sorted[i].bytes - mx);
  }
  double slope = sxy / sxx;
  if (!(slope > 0) || !std::isfinite(slope))
    slope = sorted.back().seconds / std::max(sorted.back().bytes, 1.0);
  // The intercept: relative least squares given the slope.
  double sw = 0, swr = 0, smallest = INFINITY;
  for (const Sample& s : sorted) {
    const double w = 1.0 / (s.seconds * s.seconds);
    sw += w;
    swr += w * (s.seconds - s.bytes * slope);
    smallest = std::min(smallest, s.seconds);
  }
  double alpha = swr / sw;
  if (!(alpha > 0)) alpha = smallest / 2;
  return {std::max(alpha, 1e-9), 1.0 / slope};
}

}  // namespace dtrain::calibrate
