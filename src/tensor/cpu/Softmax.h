#pragma once
// Row-wise softmax family over [rows, cols] matrices (numerically stable).
#include <cstdint>

namespace dtrain::kernels {

void softmaxRows(const float* x, float* y, int64_t rows, int64_t cols);
void logSoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols);
// gx = y * (gy - sum(gy*y)) with y = softmax output. Overwrites gx.
void softmaxBackward(const float* y, const float* gy, float* gx, int64_t rows, int64_t cols);
// gx = gy - exp(y) * sum(gy) with y = log-softmax output. Overwrites gx.
void logSoftmaxBackward(const float* y, const float* gy, float* gx, int64_t rows, int64_t cols);

// Fused cross-entropy with integer class labels in [0, cols):
// returns mean_r(-log softmax(x)[r, label[r]]) and writes probs = softmax(x)
// (kept for the backward). Throws dtrain::Error on a label out of range.
double crossEntropyForward(const float* logits, const int32_t* labels, float* probs, int64_t rows,
                           int64_t cols);
// gx[r, c] = scale * (probs[r, c] - [c == label[r]]), scale = gradOfLoss / rows.
void crossEntropyBackward(const float* probs, const int32_t* labels, float scale, float* gx,
                          int64_t rows, int64_t cols);

}  // namespace dtrain::kernels
