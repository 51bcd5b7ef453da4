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

// Least squares of time = alpha + bytes * (1/beta) over the samples, each
// weighted by 1/time^2 (relative errors): a plain fit over 4 KiB..16 MiB lets the
// largest message decide everything and leaves alpha to noise, often negative.
// Both results are kept positive and finite: alpha at least 1 ns, and a slope
// that comes out <= 0 (a flat, noise-only series) becomes the rate of the
// largest sample. Throws dtrain::Error for fewer than 2 distinct sizes.
AlphaBeta fitAlphaBeta(const std::vector<Sample>& samples);

// The median of `values` (0 when empty); `values` is reordered.
double median(std::vector<double> values);

}  // namespace dtrain::calibrate
