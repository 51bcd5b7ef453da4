#pragma once
// Tensor (intra-operator) parallelism, Megatron-style (Shoeybi et al. 2019):
// the model's layers that can be cut are cut in place, each rank of a
// tensor-parallel group keeping its slice:
//   column-parallel Linear: a slice of the output features (weight rows and
//     bias), input through copyToTensorParallel (f);
//   row-parallel Linear: a slice of the input features (weight columns),
//     output through reduceFromTensorParallel (g), the bias replicated.
// A column-parallel layer feeding a row-parallel one through an elementwise
// activation needs no communication between them: one sum forward (g), one
// backward (f) per pair. Which layers pair up is each module's own knowledge
// (Module::tensorParallelize): gpt's attention (c_attn column-parallel by
// heads, c_proj row-parallel) and MLP (c_fc, c_proj); a Sequential's
// Linear -> activation -> Linear runs (mlp's first two layers, lenet's
// fully-connected ones). Everything else (embeddings, LayerNorm, lm_head,
// convolutions, the last classifier) stays replicated: with f and g its
// inputs and gradients are identical on every rank.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/Ops.h"

namespace dtrain::nn {

class Module;

struct TensorParallelGroup {
  int rank = 0, size = 1;
  autograd::SumAcrossRanks sum;        // in place, over the group's ranks
  autograd::GatherAcrossRanks gather;  // every rank's floats, in rank order
  // False while the layers hold whole tensors again (the reporter evaluating
  // or saving the gathered model): the layers then compute as one process.
  bool active = true;
};

// How a parameter is cut: along `dim` (0: output features, rows of a weight,
// a bias; 1: input features, a weight's columns) into `size` equal slices,
// each made of `groups` interleaved pieces (c_attn's q | k | v: 3, so that a
// rank holds the q, k and v of its own heads).
struct ShardLayout {
  int dim = 0;
  int64_t groups = 1;
};
// (parameter name, layout) of every cut parameter, in the model's order;
// parameters not listed are replicated.
using TensorParallelPlan = std::vector<std::pair<std::string, ShardLayout>>;

// Rank `rank`'s slice of `full`, and its inverse (writes the slice back).
Tensor takeShard(const Tensor& full, const ShardLayout& layout, int rank, int size);
void putShard(Tensor& full, const Tensor& shard, const ShardLayout& layout, int rank, int size);

// Cuts an ordered run of layers: each Linear -> elementwise activation ->
// Linear becomes a column- then a row-parallel pair; the other layers cut what
// they know (Module::tensorParallelize). Sequential and a pipeline stage's
// ModuleGroup call it on their children.
void tensorParallelizeLayers(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& layers,
                             const std::string& prefix,
                             const std::shared_ptr<TensorParallelGroup>& group,
                             TensorParallelPlan& plan);

// Cuts `model` for `group` (its parameters become this rank's slices) and
// returns the plan (empty when it has nothing to cut). UsageError when a cut
// dimension does not divide by the group's size.
TensorParallelPlan tensorParallelize(Module& model, const std::shared_ptr<TensorParallelGroup>& group);

// Krizhevsky's "one weird trick" (2014) on a Sequential that tensorParallelize
// cut: the children before the first cut one (lenet's convolutions) run
// data-parallel inside the group, each rank on its own samples, and the rest
// on the group's gathered batch (autograd::gatherBatch before the first cut
// child, scatterBatch after the last child, both identity while the group is
// inactive). Returns the names of the parameters below the cut: their
// gradients differ between the group's ranks and must be summed over it.
// UsageError when `model` is not such a Sequential.
std::vector<std::string> dataParallelBelowCut(Module& model, const TensorParallelPlan& plan,
                                              const std::shared_ptr<TensorParallelGroup>& group);

}  // namespace dtrain::nn
