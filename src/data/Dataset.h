#pragma once
// Datasets of (sample, class label) pairs. Samples are f32 tensors of a fixed shape
// (e.g. {1, 28, 28}); labels are int32 class indices in [0, numClasses()).
//
// gather() is const and must be safe to call from several threads at once: with the
// `local` backend every rank is a thread that reads the same dataset.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tensor/Tensor.h"

namespace dtrain::data {

// A batch: x is [B, ...sampleShape] F32, y is [B] I32.
struct Batch {
  Tensor x;
  Tensor y;
  int64_t size() const { return y.defined() ? y.size(0) : 0; }
};

// What a model is built for: the shape of one sample and the number of classes
// (0 where not yet known, e.g. a data set's files before they are read).
struct DatasetSpec {
  Shape sampleShape;
  int numClasses = 0;
};

// The number of classes of `labels`: 1 + the largest (labels are >= 0).
int classCount(std::span<const int32_t> labels);

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual const Shape& sampleShape() const = 0;
  virtual int numClasses() const = 0;
  virtual int32_t label(int64_t index) const = 0;
  // Copies samples indices[0..count) into x (count * sampleNumel() floats, contiguous)
  // and their labels into y (count ints). Indices must be in [0, size()).
  virtual void gather(const int64_t* indices, int64_t count, float* x, int32_t* y) const = 0;

  int64_t sampleNumel() const { return shapeNumel(sampleShape()); }
  Shape batchShape(int64_t batchSize) const;

  // A freshly allocated batch of the given samples.
  Batch batch(std::span<const int64_t> indices) const;
  // Samples [begin, end) in order (evaluation).
  Batch range(int64_t begin, int64_t end) const;
  // Fills `out`, reusing its buffers when nothing else holds them and the shapes
  // match, allocating new ones otherwise (so a batch still referenced, e.g. by an
  // autograd graph, is never overwritten).
  void fill(std::span<const int64_t> indices, Batch& out) const;

 protected:
  void checkIndices(std::span<const int64_t> indices) const;
};

// Every label, in index order (partitioners and class statistics need them).
std::vector<int32_t> labelsOf(const Dataset& ds);

// All samples in memory: x [N, ...sampleShape] F32 and y [N] I32.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor x, Tensor y, int numClasses);

  int64_t size() const override { return y_.size(0); }
  const Shape& sampleShape() const override { return sampleShape_; }
  int numClasses() const override { return numClasses_; }
  int32_t label(int64_t index) const override { return y_.data<int32_t>()[index]; }
  void gather(const int64_t* indices, int64_t count, float* x, int32_t* y) const override;

  const Tensor& images() const { return x_; }
  const Tensor& labels() const { return y_; }

 private:
  Tensor x_, y_;
  Shape sampleShape_;
  int numClasses_;
};

// A view of a subset of another dataset (e.g. one federated client's shard):
// sample i of the subset is sample indices[i] of the base.
class SubsetDataset : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  const Shape& sampleShape() const override { return base_->sampleShape(); }
  int numClasses() const override { return base_->numClasses(); }
  int32_t label(int64_t index) const override { return base_->label(indices_[index]); }
  void gather(const int64_t* indices, int64_t count, float* x, int32_t* y) const override;

  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

}  // namespace dtrain::data
