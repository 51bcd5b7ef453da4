// Cutting layers for tensor parallelism (nn/TensorParallelLayers.h): the slices, the
// layers' own cuts, and the walk over a model.
#include "nn/TensorParallelLayers.h"

#include <cstring>

#include "core/Error.h"
#include "nn/Layers.h"

namespace dtrain::nn {

namespace {

// Copies rank's slice between `full` and `shard` (toShard: full -> shard).
void copySlice(Tensor& full, Tensor& shard, const ShardLayout& l, int rank, int size, bool toShard) {
  DTRAIN_CHECK(full.isContiguous() && shard.isContiguous(), "tensor parallel: tensors must be contiguous");
  float* f = full.data<float>();
  float* s = shard.data<float>();
  if (l.dim == 0) {
    // [N, rest...] as `groups` blocks of N/groups rows; the rank's rows of each.
    const int64_t rows = full.size(0), rest = full.numel() / rows;
    const int64_t perGroup = rows / l.groups, mine = perGroup / size;
    for (int64_t g = 0; g < l.groups; ++g) {
      float* from = f + (g * perGroup + rank * mine) * rest;
      float* to = s + g * mine * rest;
      const size_t bytes = static_cast<size_t>(mine * rest) * sizeof(float);
      toShard ? std::memcpy(to, from, bytes) : std::memcpy(from, to, bytes);
    }
    return;
  }
  // [rows, cols]: the rank's columns of every row.
  const int64_t rows = full.size(0), cols = full.size(1), mine = cols / size;
  for (int64_t r = 0; r < rows; ++r) {
    float* from = f + r * cols + rank * mine;
    float* to = s + r * mine;
    const size_t bytes = static_cast<size_t>(mine) * sizeof(float);
    toShard ? std::memcpy(to, from, bytes) : std::memcpy(from, to, bytes);
  }
}

Shape shardShape(const Tensor& full, const ShardLayout& l, int size) {
  Shape s = full.shape();
  DTRAIN_CHECK(l.dim < static_cast<int>(s.size()), "tensor parallel: a ", s.size(),
               "-d tensor has no dimension ", l.dim);
  DTRAIN_CHECK_USAGE(s[l.dim] % (l.groups * size) == 0, "--tensor-parallel ", size, ": a dimension of ",
                     s[l.dim], " does not split into ", size, " equal slices",
                     l.groups > 1 ? detail::concat(" of ", l.groups, " pieces") : std::string());
  s[l.dim] /= size;
  return s;
}

void cut(Variable& p, const std::string& name, const ShardLayout& layout,
         const std::shared_ptr<TensorParallelGroup>& group, TensorParallelPlan& plan) {
  if (!p.defined()) return;
  p.setData(takeShard(p.data(), layout, group->rank, group->size));
  plan.emplace_back(name, layout);
}

}  // namespace

Tensor takeShard(const Tensor& full, const ShardLayout& layout, int rank, int size) {
  Tensor shard = Tensor::empty(shardShape(full, layout, size));
  Tensor source = full.contiguous();
  copySlice(source, shard, layout, rank, size, true);
  return shard;
}

void putShard(Tensor& full, const Tensor& shard, const ShardLayout& layout, int rank, int size) {
  DTRAIN_CHECK(shard.shape() == shardShape(full, layout, size), "tensor parallel: a shard of ",
               shapeStr(shard.shape()), " does not fit ", shapeStr(full.shape()));
  Tensor source = shard.contiguous();
  copySlice(full, source, layout, rank, size, false);
}

void Module::tensorParallelize(const std::string& prefix,
                               const std::shared_ptr<TensorParallelGroup>& group,
                               TensorParallelPlan& plan) {
  for (auto& [name, child] : children_) child->tensorParallelize(prefix + name + ".", group, plan);
}

void Linear::splitColumns(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                          int64_t groups, TensorParallelPlan& plan) {
  cut(weight, prefix + "weight", {0, groups}, group, plan);
  cut(bias, prefix + "bias", {0, groups}, group, plan);
  if (loraB) cut(loraB->weight, prefix + "lora_B.weight", {0, groups}, group, plan);  // A stays whole
  tp = group;
  rowParallel = false;
}

void Linear::splitRows(const std::string& prefix, const std::shared_ptr<TensorParallelGroup>& group,
                       TensorParallelPlan& plan) {
  cut(weight, prefix + "weight", {1, 1}, group, plan);  // the bias stays whole, added once
  if (loraA) cut(loraA->weight, prefix + "lora_A.weight", {1, 1}, group, plan);  // B stays whole
  tp = group;
  rowParallel = true;
}

void tensorParallelizeLayers(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& layers,
                             const std::string& prefix,
                             const std::shared_ptr<TensorParallelGroup>& group,
                             TensorParallelPlan& plan) {
  for (size_t i = 0; i < layers.size(); ++i) {
    auto* first = dynamic_cast<Linear*>(layers[i].second.get());
    if (first && i + 2 < layers.size() && layers[i + 1].second->isElementwise()) {
      if (auto* second = dynamic_cast<Linear*>(layers[i + 2].second.get())) {
        first->splitColumns(prefix + layers[i].first + ".", group, 1, plan);
        second->splitRows(prefix + layers[i + 2].first + ".", group, plan);
        i += 2;
        continue;
      }
    }
    layers[i].second->tensorParallelize(prefix + layers[i].first + ".", group, plan);
  }
}

void Sequential::tensorParallelize(const std::string& prefix,
                                   const std::shared_ptr<TensorParallelGroup>& group,
                                   TensorParallelPlan& plan) {
  tensorParallelizeLayers(children(), prefix, group, plan);
}

TensorParallelPlan tensorParallelize(Module& model, const std::shared_ptr<TensorParallelGroup>& group) {
  TensorParallelPlan plan;
  model.tensorParallelize("", group, plan);
  return plan;
}

std::vector<std::string> dataParallelBelowCut(Module& model, const TensorParallelPlan& plan,
                                              const std::shared_ptr<TensorParallelGroup>& group) {
  auto* seq = dynamic_cast<Sequential*>(&model);
  const auto& layers = seq ? seq->children() : decltype(model.children()){};
  size_t first = layers.size();
  for (size_t i = 0; i < layers.size() && first == layers.size(); ++i)
    for (auto& [name, layout] : plan)
      if (name.rfind(layers[i].first + ".", 0) == 0) first = i;
  DTRAIN_CHECK_USAGE(first < layers.size(), "--tensor-parallel-style krizhevsky needs a sequence of "
                     "layers with a Linear -> activation -> Linear run to cut (mlp, lenet)");
  std::vector<std::string> below;
  for (size_t i = 0; i < first; ++i)
    for (auto& [name, p] : layers[i].second->namedParameters()) below.push_back(layers[i].first + "." + name);
  std::shared_ptr<TensorParallelGroup> g = group;
  layers[first].second->setForwardWrapper([g](const Variable& x, const Module::Forward& forward) {
    return forward(g->active ? autograd::gatherBatch(x, g->rank, g->size, g->gather) : x);
  });
  layers.back().second->setForwardWrapper([g](const Variable& x, const Module::Forward& forward) {
    Variable y = forward(x);
    return g->active ? autograd::scatterBatch(y, g->rank, g->size, g->gather) : y;
  });
  return below;
}

}  // namespace dtrain::nn
