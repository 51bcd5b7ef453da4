#pragma once
// The alpha-beta model of a message: time(b) = alpha + b / bytesPerS, fitted to
// measured (bytes, seconds) points.
#include <vector>

namespace dtrain::calibrate {

struct Sample {
  double bytes = 0;
  double seconds = 0;
};

struct AlphaBeta {
  double alphaS = 0;      // latency: the time of an empty message
  double bytesPerS = 0;   // bandwidth: 1 / the time per byte
  double seconds(double bytes) const { return alphaS + bytes / bytesPerS; }
};

// Hockney's reading of the two terms: beta is the asymptotic rate, the
// least-squares slope over the larger half of the sizes (past the caches and a
// token bucket's burst, which make smaller messages faster than the link's
// rate); alpha, given that slope, is the intercept that minimizes the relative
// errors (weights 1/time^2, so the small messages decide it). Where the small
// messages ran faster than the asymptotic rate allows (alpha <= 0: a burst,
// a cache), alpha is half the smallest measured time. A slope <= 0 (a flat,
// noise-only series) becomes the rate of the largest sample. Exact points on a
// line are recovered exactly. Throws dtrain::Error for fewer than 2 distinct
// sizes or a time that is not positive and finite.
AlphaBeta fitAlphaBeta(const std::vector<Sample>& samples);

// The median of `values` (0 when empty); `values` is reordered.
double median(std::vector<double> values);

}  // namespace dtrain::calibrate
