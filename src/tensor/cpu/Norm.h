#pragma once
// Normalization kernels (training-mode statistics, biased variance, as torch).
#include <cstdint>

namespace dtrain::kernels {

// The fused BatchNorm of autograd::batchNorm2dAct, in pieces so that SyncBN can
// sum the per-channel reductions over ranks between them. x is [N, C, S]; each
// piece makes one pass over the data, parallel over channels, with float lane
// sums per (n, c) row added in double.
//
// sum[c] = sum (x - pivot[c]), sumSq[c] = sum (x - pivot[c])^2 over the channel's
// N*S values: one pass, with the pivot near the mean (a value of the channel,
// or the running mean) so that var = sumSq/M - (sum/M)^2 does not cancel.
void batchNormSums(const float* x, const float* pivot, double* sum, double* sumSq, int64_t N,
                   int64_t C, int64_t S);
// y = x * scale[c] + shift[c] (+ residual) (then max(0, .) when relu).
void batchNormApply(const float* x, const float* scale, const float* shift, const float* residual,
                    bool relu, float* y, int64_t N, int64_t C, int64_t S);
// Backward reductions: g = gy, or with relu gy where y > 0 (written to gMasked);
// sumG[c] = sum g, sumGX[c] = sum g * (x - mean[c]).
void batchNormBackwardSums(const float* x, const float* y, const float* gy, const float* mean,
                           float* gMasked, double* sumG, double* sumGX, int64_t N, int64_t C,
                           int64_t S);
// gx = k[c] * (g - meanG[c] - (x - mean[c]) * q[c]) (training: k = gamma*invStd,
// meanG = sumG/M, q = invStd^2 * sumGX/M; eval: k = gamma*invStd, meanG = q = 0).
void batchNormBackwardApply(const float* x, const float* g, const float* mean, const float* k,
                            const float* meanG, const float* q, float* gx, int64_t N, int64_t C,
                            int64_t S);

// The same four on x in MemoryFormat::ChannelBlocked ([N, C/16, S, 16], C a
// multiple of 16; Blocked.h), where a vector holds one pixel's 16 channels:
// the per-element arithmetic is the plain kernels' (apply and backward-apply
// give the same bits for the same scale/shift or k/meanG/q), the sums add in
// another order.
void batchNormSumsBlocked(const float* x, const float* pivot, double* sum, double* sumSq,
                          int64_t N, int64_t C, int64_t S);
void batchNormApplyBlocked(const float* x, const float* scale, const float* shift,
                           const float* residual, bool relu, float* y, int64_t N, int64_t C,
                           int64_t S);
void batchNormBackwardSumsBlocked(const float* x, const float* y, const float* gy,
                                  const float* mean, float* gMasked, double* sumG, double* sumGX,
                                  int64_t N, int64_t C, int64_t S);
void batchNormBackwardApplyBlocked(const float* x, const float* g, const float* mean,
                                   const float* k, const float* meanG, const float* q, float* gx,
                                   int64_t N, int64_t C, int64_t S);

// LayerNorm over the last D elements of [R, D]. Writes y, saveMean[R], saveInvStd[R].
void layerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                      float* saveMean, float* saveInvStd, int64_t R, int64_t D, float eps);
void layerNormBackward(const float* x, const float* gamma, const float* saveMean,
                       const float* saveInvStd, const float* gy, float* gx, float* ggamma,
                       float* gbeta, int64_t R, int64_t D);

}  // namespace dtrain::kernels
