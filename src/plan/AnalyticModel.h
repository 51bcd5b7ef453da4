#pragma once
// What the cost model needs of a model: its layers in order, each with its
// parameter tensors, its forward FLOPs and the activation bytes it keeps for
// backward, per sample. The built-in models are described analytically
// (gpt-*: nanoGPT's GPT-2; mlp) and the tests check the parameter counts
// against the modules nn::buildModel builds; a transformer of any shape (the
// papers' GPTs) comes from gptProfile().
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/RunConfig.h"
#include "plan/Machine.h"

namespace dtrain::plan {

struct AnalyticLayer {
  std::string name;                 // the layer sequence's name (nn/LayerSequence.h): "transformer.h.0"
  // The layers of the model's sequence it stands for (calibrate times them one
  // by one): one for the built-in models (mlp's Flatten, Linears and ReLUs,
  // gpt's embedding, blocks and head).
  std::vector<std::string> sequenceNames;
  std::vector<int64_t> tensors;     // parameter tensors' element counts
  int64_t tensorParallelParams = 0; // of these, the elements cut by tensor parallelism
  double forwardFlops = 0;          // per sample
  int64_t outputWidth = 0;          // its output per token (what a pipeline stage ending here sends; 0: the model's width)
  double activationBytes = 0;       // kept for backward, per sample (fp32), not cut
  double activationBytesCut = 0;    // the part tensor parallelism cuts (divided by T)
  double recomputeKeptBytes = 0;    // with --recompute: what the layer keeps (its input)
  // What its backward allocates before it frees its own activations, per sample
  // (a block's gradient temporaries, the loss's gradient of the logits).
  double backwardTransientBytes = 0;
  int tensorParallelSums = 0;       // Megatron's forward allreduces (g) of [tokens, width]
  // Its backward allreduces (f, before each column-parallel Linear); -1: one per
  // forward one. None where that Linear reads the model's input, whose
  // gradient no one needs (the mlp's first layer).
  int tensorParallelBackwardSums = -1;
  bool computeCut = false;          // its FLOPs divide across the tensor-parallel group
  // The widths per token of its sums (0: the model's width).
  int64_t forwardSumWidth = 0, backwardSumWidth = 0;
  // A Linear, or an elementwise activation, of a layer sequence that
  // nn/TensorParallelLayers.h pairs (Linear -> activation -> Linear) within each
  // pipeline stage: its cut and sums depend on where the stages are cut
  // (plan/Layout.h's pairedForLayout fills the fields above).
  bool sequenceLinear = false, sequenceActivation = false;
  int64_t inputWidth = 0;
  // Bytes the elementwise ops (LayerNorm, GELU, softmax, residual adds) read
  // and write per sample in forward, at the memory's streaming rate; the
  // part tensor parallelism cuts apart.
  double elementwiseBytes = 0, elementwiseBytesCut = 0;
  // (in, out) of each nn::Linear weight it holds, whose gradient --sfb can send
  // as tokensPerSample factor rows per sample instead.
  std::vector<std::pair<int64_t, int64_t>> linears;
  // (rows, columns) of its other 2-D parameters (gpt's embedding tables), which
  // PowerSGD factors as it factors the Linears' weights.
  std::vector<std::pair<int64_t, int64_t>> tables;
  int64_t params() const;
};

struct AnalyticModel {
  std::string name;
  std::vector<AnalyticLayer> layers;
  bool languageModel = false;
  int64_t tokensPerSample = 1;      // language models: the block size
  int64_t width = 0;                // the activations' width between layers
  int64_t heads = 0;
  double elementBytes = 4;          // of activations and gradients on the wire (fp32)
  // Recomputing a block in backward holds its activations and these
  // temporaries per sample at once.
  double recomputeExtraBytes = 0;
  int64_t params() const;
  double forwardFlops() const;      // per sample
};

// A GPT-2 (nanoGPT: tied lm_head, biases, pre-LayerNorm) of this shape.
struct GptShape {
  int64_t layers = 2, heads = 2, width = 64, sequence = 64, vocab = 256;
  // Megatron-LM 2021's implementation instead of dtrain's: the embedding and
  // lm_head cut by vocabulary across the tensor-parallel group, the attention
  // probabilities written out (scale-mask-softmax, then dropout), dropout
  // after attention and MLP, fp16 activations.
  bool megatron = false;
};
AnalyticModel gptProfile(const std::string& name, const GptShape& s);
// mlp: Linear(in, h1), ReLU, ..., Linear(hk, classes).
AnalyticModel mlpProfile(int64_t inputs, const std::vector<int64_t>& hidden, int64_t classes);

// The profile of the configuration's model (its overrides applied). Throws
// UsageError for a model without one (lenet, resnet-*, a program's own) unless
// `machine` has measured it (its "models" section, dtrain calibrate): then the
// parameters are counted from the real module, the measured times stand for
// the FLOPs, and the measured activation bytes (per sample, at the micro-batch
// nearest the configuration's) for the activations.
AnalyticModel profileFor(const api::RunConfig& rc, const Machine* machine = nullptr);

// The parameter count of the module nn::buildModel builds (what the profiles
// are checked against).
int64_t builtModelParams(const api::RunConfig& rc);

}  // namespace dtrain::plan
