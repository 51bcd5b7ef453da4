#pragma once
// Fused causal multi-head self-attention (flash-attention style) on the packed
// projections of a GPT block, as nanoGPT lays them out:
//   qkv [B, T, 3C]: row t holds q | k | v (C each); head h of each is columns
//   [h*D, (h+1)*D) of its part, D = C / H.
//   y   [B, T, C]: head h's output in columns [h*D, (h+1)*D) (heads merged).
// y = softmax(q k^T / sqrt(D) with the future masked) v, per batch and head.
// Heads are read and written in place through row strides (no split or merge
// copies). Scores are only ever held one [query block x key block] tile per
// thread: the forward keeps an online softmax per row and saves the per-row
// log-sum-exp; the backward recomputes each tile from it. Work is split over
// (batch, head) pairs with dtrain::parallelFor.
#include <cstdint>

#include "tensor/DType.h"

namespace dtrain::kernels {

// qkvBf16 (--precision bf16): a bf16 copy of qkv; the tile products then read
// it, and take bf16 copies of the probabilities, the output gradient and dS,
// accumulating in fp32; the online softmax and its statistics stay fp32.
//
// lse [B, H, T] receives log(sum_j exp(score_tj)) per query row (may be null
// when no backward follows).
void causalAttentionForward(const float* qkv, float* y, float* lse, int64_t B, int64_t T, int64_t C,
                            int64_t H, const BFloat16* qkvBf16 = nullptr);

// From the forward's qkv, y, lse and the output gradient gy [B, T, C], writes
// (overwrites) gqkv [B, T, 3C].
void causalAttentionBackward(const float* qkv, const float* y, const float* lse, const float* gy,
                             float* gqkv, int64_t B, int64_t T, int64_t C, int64_t H);
// The same from bf16 copies of qkv and y (what a bf16 forward saves: half the
// bytes); bf16 products as above.
void causalAttentionBackwardBf16(const BFloat16* qkv, const BFloat16* y, const float* lse,
                                 const float* gy, float* gqkv, int64_t B, int64_t T, int64_t C,
                                 int64_t H);

}  // namespace dtrain::kernels
