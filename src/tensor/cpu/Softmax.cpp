#include "tensor/cpu/Softmax.h"

#include <cmath>
#include <limits>

#include "core/Error.h"
#include "tensor/cpu/FastMath.h"

namespace dtrain::kernels {
namespace {

float rowMax(const float* __restrict x, int64_t cols) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < cols; ++c) m = x[c] > m ? x[c] : m;
  return m;
}

// y[c] = exp(x[c] - m); returns the sum (float lanes, then summed in order).
float expShifted(const float* x, float m, float* y, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) y[c] = detail::fastExp(x[c] - m);
  double s = 0.0;
  for (int64_t c = 0; c < cols; ++c) s += y[c];
  return static_cast<float>(s);
}

}  // namespace

void softmaxRows(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float m = rowMax(xr, cols);
    const float inv = 1.f / expShifted(xr, m, yr, cols);
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}

void logSoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float m = rowMax(xr, cols);
    // Accumulated in double with std::exp: the log-sum-exp is the value itself,
    // not a ratio, so its absolute error is what the caller sees.
    double s = 0.0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(xr[c] - m));
    const float lse = m + static_cast<float>(std::log(s));
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
  }
}

void softmaxBackward(const float* y, const float* gy, float* gx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* gr = gy + r * cols;
    float* out = gx + r * cols;
    double dot = 0.0;
    for (int64_t c = 0; c < cols; ++c) dot += static_cast<double>(gr[c]) * yr[c];
    const float d = static_cast<float>(dot);
    for (int64_t c = 0; c < cols; ++c) out[c] = yr[c] * (gr[c] - d);
  }
}

void logSoftmaxBackward(const float* y, const float* gy, float* gx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* gr = gy + r * cols;
    float* out = gx + r * cols;
    double s = 0.0;
    for (int64_t c = 0; c < cols; ++c) s += gr[c];
    const float sg = static_cast<float>(s);
    for (int64_t c = 0; c < cols; ++c) out[c] = gr[c] - std::exp(yr[c]) * sg;
  }
}

double crossEntropyForward(const float* logits, const int32_t* labels, float* probs, int64_t rows,
                           int64_t cols) {
  // Labels are checked first so that an error leaves probs untouched.
  for (int64_t r = 0; r < rows; ++r)
    DTRAIN_CHECK(labels[r] >= 0 && labels[r] < cols, "crossEntropy: label ", labels[r], " of row ",
                 r, " is out of range [0, ", cols, ")");
  double loss = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * cols;
    float* pr = probs + r * cols;
    const float m = rowMax(xr, cols);
    const float picked = xr[labels[r]];  // read before probs (which may alias) is written
    const float s = expShifted(xr, m, pr, cols);
    const float inv = 1.f / s;
    for (int64_t c = 0; c < cols; ++c) pr[c] *= inv;
    // -log softmax[label] = log(sum) - (x[label] - m), exact even when the
    // probability underflows to 0.
    loss += std::log(static_cast<double>(s)) - static_cast<double>(picked - m);
  }
  return rows > 0 ? loss / static_cast<double>(rows) : 0.0;
}

void crossEntropyBackward(const float* probs, const int32_t* labels, float scale, float* gx,
                          int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = probs + r * cols;
    float* out = gx + r * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] = scale * pr[c];
    out[labels[r]] -= scale;
  }
}

}  // namespace dtrain::kernels
