#pragma once
// Differentiable operations on Variables. Each records a Node when any input
// requires grad (and grad mode is on) and otherwise just computes. Inputs are
// f32; 2-d ops take [rows, cols], spatial ops take NCHW.
#include <cstdint>
#include <functional>

#include "autograd/Variable.h"
#include "core/Rng.h"

namespace dtrain::autograd {

// Linear algebra. linear takes x [..., in] (leading dims flattened into rows).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);  // x W^T + b
Variable matmul(const Variable& a, const Variable& b);                              // [M,K]x[K,N]
// Batched: [Bt,M,K] x [Bt,K,N] -> [Bt,M,N]; transA reads a as [Bt,K,M], transB b as [Bt,N,K].
Variable bmm(const Variable& a, const Variable& b, bool transA = false, bool transB = false);

// Causal multi-head self-attention, fused (flash-attention style, see
// tensor/cpu/Attention.h): qkv [B, T, 3C] is a GPT block's c_attn output (q | k | v,
// heads split as nanoGPT), y [B, T, C] has the heads merged back, scale 1/sqrt(C/nHead).
Variable causalSelfAttention(const Variable& qkv, int64_t nHead);

// Elementwise (same shapes)
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable scale(const Variable& x, float alpha);
Variable relu(const Variable& x);
Variable sigmoid(const Variable& x);
Variable tanh(const Variable& x);
Variable gelu(const Variable& x);
// Inverted dropout: zeroes with probability p and scales the rest by 1/(1-p);
// identity when !training or p == 0. The mask comes from `rng`.
Variable dropout(const Variable& x, float p, bool training, Rng& rng);

// Broadcasting as NumPy and PyTorch do it (autograd/ops/BroadcastOps.cpp): the
// shape a and b broadcast to (UsageError naming both when they cannot), and x
// repeated to `shape` along its size-1 or missing leading axes (a copy), whose
// gradient sums over those axes. The elementwise ops above stay same-shape; the
// Python operators broadcast their operands first.
Shape broadcastShape(const Shape& a, const Shape& b);
Variable broadcastTo(const Variable& x, const Shape& shape);

// Shape (views: no copy in forward)
Variable reshape(const Variable& x, const Shape& shape);
Variable flatten(const Variable& x, int64_t startDim = 1);

// Reductions to a scalar
Variable sum(const Variable& x);
Variable mean(const Variable& x);

// Spatial
// `output` asks for the result's MemoryFormat: ChannelBlocked is granted where
// the convolution can write it in place (fp32, kernels::convBlockable), else
// the output is plain. The input may be in either format.
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride = 1,
                int64_t padding = 0, MemoryFormat output = MemoryFormat::Plain);
Variable maxPool2d(const Variable& x, int64_t kernel, int64_t stride, int64_t padding = 0);
Variable avgPool2d(const Variable& x, int64_t kernel, int64_t stride, int64_t padding = 0);
// Mean over H and W: [N, C, H, W] -> [N, C] (adaptive_avg_pool2d(x, 1) then flatten).
Variable globalAvgPool2d(const Variable& x);

// Normalization. batchNorm2d updates runMean/runVar in training mode (momentum
// as in torch: run = (1 - m) run + m batch, unbiased batch variance).
Variable batchNorm2d(const Variable& x, const Variable& gamma, const Variable& beta,
                     Tensor& runMean, Tensor& runVar, bool training, float momentum, float eps);
Variable layerNorm(const Variable& x, const Variable& gamma, const Variable& beta, float eps);

// Lookup: indices (I32, any shape) into weight [V, D] -> [..., D].
Variable embedding(const Tensor& indices, const Variable& weight);

// Row-wise over the last dim of a 2-d input
Variable softmax(const Variable& x);
Variable logSoftmax(const Variable& x);

// Losses (mean over the batch, as torch's default reduction). crossEntropy takes
// logits [..., classes] and I32 labels with one entry per row (e.g. [B, T, V] with [B, T]).
Variable crossEntropy(const Variable& logits, const Tensor& labels);
Variable mseLoss(const Variable& pred, const Tensor& target);

// Tensor parallelism (Megatron's f and g; ops/TensorParallel.cpp). `sum` adds
// n floats in place over the ranks of a tensor-parallel group.
using SumAcrossRanks = std::function<void(float* data, int64_t n)>;
// BatchNorm fused with what follows it in a ResNet: y = bn(x) (+ residual)
// (then ReLU), one pass forward, two backward, whatever the combination.
// Training: batch statistics (biased variance normalizes; the running
// estimates get the unbiased one with `momentum`, unless updateRunning is
// false); eval: the running statistics. `sync` (SyncBN): sums n floats over the
// data-parallel replicas, called once forward ([sum | squared sum | count] per
// channel) and once backward ([sum dy | sum dy (x - mean)]); empty: this
// replica's batch alone.
struct BatchNormSpec {
  Tensor* runMean = nullptr;
  Tensor* runVar = nullptr;
  bool training = true;
  float momentum = 0.1f, eps = 1e-5f;
  bool updateRunning = true;
  bool relu = false;
  SumAcrossRanks sync;
};
Variable batchNorm2dAct(const Variable& x, const Variable& gamma, const Variable& beta,
                        const Variable& residual, const BatchNormSpec& spec);

// Identity forward; the backward sums the gradient over the group.
Variable copyToTensorParallel(const Variable& x, const SumAcrossRanks& sum);
// Forward: the sum over the group of `partial` [..., C], plus bias [C] (may be
// undefined) once; the backward passes the gradient through.
Variable reduceFromTensorParallel(const Variable& partial, const Variable& bias,
                                  const SumAcrossRanks& sum);

// Krizhevsky's "one weird trick" (2014): layers below a tensor-parallel
// region run data-parallel (each rank of the group on its own samples), the
// region on the group's gathered batch. `gather` copies n floats of every
// rank, in rank order, into `all` (n * size floats).
using GatherAcrossRanks = std::function<void(const float* mine, float* all, int64_t n)>;
// Forward: the group's batches stacked along dim 0 in rank order; backward:
// this rank's rows of the gradient (the region's f sum made it whole and the
// same on every rank).
Variable gatherBatch(const Variable& x, int rank, int size, const GatherAcrossRanks& gather);
// Forward: this rank's rows of the group's output; backward: every rank's
// rows of the gradient, gathered and scaled by 1/size (the group's loss is the
// mean of its ranks' losses), so the region sees the whole batch's gradient.
Variable scatterBatch(const Variable& y, int rank, int size, const GatherAcrossRanks& gather);

// Identity forward; when backward reaches it, `hook` runs before the gradient
// flows on to the nodes that produced x (ops/Hooks.cpp).
Variable beforeBackward(const Variable& x, std::function<void()> hook);
// Identity forward; when backward reaches it, `hook` sees the gradient of x
// (shaped like x; valid only during the call: copy what is kept) before it
// flows on unchanged (sufficient factor broadcasting reads a Linear's output
// gradient here).
Variable observeGradient(const Variable& x, std::function<void(const Tensor& grad)> hook);

}  // namespace dtrain::autograd
