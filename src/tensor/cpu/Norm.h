#pragma once
// Normalization kernels (training-mode statistics, biased variance, as torch).
#include <cstdint>

namespace dtrain::kernels {

// BatchNorm over [N, C, S] (S = H*W): per-channel mean/var over N*S.
// Writes y, saveMean[C], saveInvStd[C]; gamma/beta may be null (affine=false).
void batchNormForwardTrain(const float* x, const float* gamma, const float* beta, float* y,
                           float* saveMean, float* saveInvStd, int64_t N, int64_t C, int64_t S,
                           float eps);
// Eval mode with running statistics.
void batchNormForwardEval(const float* x, const float* gamma, const float* beta,
                          const float* runMean, const float* runVar, float* y, int64_t N,
                          int64_t C, int64_t S, float eps);
// Overwrites gx, ggamma, gbeta (ggamma/gbeta may be null).
void batchNormBackward(const float* x, const float* gamma, const float* saveMean,
                       const float* saveInvStd, const float* gy, float* gx, float* ggamma,
                       float* gbeta, int64_t N, int64_t C, int64_t S);

// LayerNorm over the last D elements of [R, D]. Writes y, saveMean[R], saveInvStd[R].
void layerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                      float* saveMean, float* saveInvStd, int64_t R, int64_t D, float eps);
void layerNormBackward(const float* x, const float* gamma, const float* saveMean,
                       const float* saveInvStd, const float* gy, float* gx, float* ggamma,
                       float* gbeta, int64_t R, int64_t D);

}  // namespace dtrain::kernels
