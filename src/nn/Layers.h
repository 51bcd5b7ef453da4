#pragma once
// The built-in layers. Parameter names and layouts follow torch.nn.
#include <memory>
#include <vector>

#include "autograd/Ops.h"
#include "core/Rng.h"
#include "nn/Module.h"

namespace dtrain::nn {

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, Rng& rng, bool bias = true);
  Variable forward(const Variable& x) override;
  std::string describe() const override;
  Variable weight, bias;  // [out, in], [out]

  // LoRA (nn/Lora.h): output += scale * x A^T B^T, A = loraA->weight [r, in],
  // B = loraB->weight [out, r], registered as children "lora_A" and "lora_B"
  // (peft's names). Null without adapters.
  void attachLowRank(std::shared_ptr<Linear> a, std::shared_ptr<Linear> b, float scale);
  std::shared_ptr<Linear> loraA, loraB;
  float loraScale = 0;

  // Tensor parallelism (nn/TensorParallelLayers.h): keep only this rank's slice of
  // the output features (column-parallel; `groups` interleaved pieces, as
  // c_attn's q | k | v) or of the input features (row-parallel), and record
  // the cut parameters in `plan` under `prefix`.
  void splitColumns(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                    int64_t groups, TensorParallelPlan& plan);
  void splitRows(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                 TensorParallelPlan& plan);
  // Whether the layer computes its slice now (cut, and the group active).
  bool tensorParallel() const { return tp && tp->active; }
  std::shared_ptr<TensorParallelGroup> tp;  // null: the whole layer
  bool rowParallel = false;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, int64_t kernel, Rng& rng, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);
  Variable forward(const Variable& x) override;
  std::string describe() const override;
  Variable weight, bias;  // [out, in, k, k], [out]
  int64_t stride, padding;
  // The format asked of autograd::conv2d for the output: ChannelBlocked where
  // the next layers read it (a ResNet's BatchNorm and convolutions).
  MemoryFormat output = MemoryFormat::Plain;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  Variable forward(const Variable& x) override;
  std::string describe() const override;
  int64_t kernel, stride, padding;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
  Variable forward(const Variable& x) override;
  std::string describe() const override;
  int64_t kernel, stride, padding;
};

class ReLU : public Module {
 public:
  Variable forward(const Variable& x) override { return autograd::relu(x); }
  std::string describe() const override { return "ReLU()"; }
  bool isElementwise() const override { return true; }
};

class Sigmoid : public Module {
 public:
  Variable forward(const Variable& x) override { return autograd::sigmoid(x); }
  std::string describe() const override { return "Sigmoid()"; }
  bool isElementwise() const override { return true; }
};

class Tanh : public Module {
 public:
  Variable forward(const Variable& x) override { return autograd::tanh(x); }
  std::string describe() const override { return "Tanh()"; }
  bool isElementwise() const override { return true; }
};

class GELU : public Module {
 public:
  Variable forward(const Variable& x) override { return autograd::gelu(x); }
  std::string describe() const override { return "GELU()"; }
  bool isElementwise() const override { return true; }
};

class Flatten : public Module {
 public:
  Variable forward(const Variable& x) override { return autograd::flatten(x, 1); }
  std::string describe() const override { return "Flatten()"; }
};

class Dropout : public Module {
 public:
  Dropout(float p, uint64_t seed);
  Variable forward(const Variable& x) override;
  std::string describe() const override;
  float p;
  Rng rng;
};

// torch.nn.BatchNorm2d: training normalizes by the batch's statistics (biased
// variance) and moves the running ones (unbiased variance, momentum 0.1); eval
// uses the running ones. running_mean, running_var and num_batches_tracked are
// buffers (checkpointed, never seen by the optimizer). Under recomputation the
// re-run leaves them alone. `sync` set (--sync-bn): statistics over every
// data-parallel replica's batch (torch.nn.SyncBatchNorm).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, float eps = 1e-5f, float momentum = 0.1f);
  Variable forward(const Variable& x) override;
  // relu(bn(x)) and relu(bn(x) + residual) in one pass (ResNet's blocks).
  Variable forwardRelu(const Variable& x);
  Variable forwardAddRelu(const Variable& x, const Variable& residual);
  std::string describe() const override;
  Variable weight, bias;
  Tensor *runningMean, *runningVar, *numBatchesTracked;
  float eps, momentum;
  autograd::SumAcrossRanks sync;

 private:
  Variable run(const Variable& x, const Variable& residual, bool relu);
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f);
  Variable forward(const Variable& x) override;
  std::string describe() const override;
  Variable weight, bias;
  float eps;
};

class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim, Rng& rng);
  // Input: indices stored as f32 values in a Variable (no grad); see lookup().
  Variable forward(const Variable& x) override;
  Variable lookup(const Tensor& indices) { return autograd::embedding(indices, weight); }
  std::string describe() const override;
  Variable weight;  // [vocab, dim], initialized N(0, 1) as torch
};

// Children named "0", "1", ... as torch.nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  void append(std::shared_ptr<Module> layer);
  Variable forward(const Variable& x) override;
  std::string describe() const override { return "Sequential"; }
  size_t size() const { return layers_.size(); }
  // Each Linear -> elementwise activation -> Linear run becomes a column- then
  // a row-parallel pair; the other layers recurse.
  void tensorParallelize(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                         TensorParallelPlan& plan) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace dtrain::nn
