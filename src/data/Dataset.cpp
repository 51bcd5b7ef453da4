#include "data/Dataset.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>

namespace dtrain::data {
namespace {

// True when `t` is the only holder of its storage, so its buffer may be overwritten.
bool solelyOwned(const Tensor& t) {
  if (!t.defined() || t.storage().use_count() != 1) return false;
  // Pairs with the release in the other holder's shared_ptr decrement: their last
  // reads of the buffer happen before our writes.
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

}  // namespace

int classCount(std::span<const int32_t> labels) {
  int32_t largest = -1;
  for (int32_t l : labels) largest = std::max(largest, l);
  return largest + 1;
}

Shape Dataset::batchShape(int64_t batchSize) const {
  Shape s{batchSize};
  const Shape& sample = sampleShape();
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

void Dataset::checkIndices(std::span<const int64_t> indices) const {
  const int64_t n = size();
  for (int64_t i : indices)
    DTRAIN_CHECK(i >= 0 && i < n, "dataset index ", i, " out of range [0, ", n, ")");
}

Batch Dataset::batch(std::span<const int64_t> indices) const {
  Batch b;
  fill(indices, b);
  return b;
}

Batch Dataset::range(int64_t begin, int64_t end) const {
  DTRAIN_CHECK(0 <= begin && begin <= end && end <= size(), "dataset range [", begin, ", ", end,
               ") out of [0, ", size(), ")");
  std::vector<int64_t> idx(static_cast<size_t>(end - begin));
  std::iota(idx.begin(), idx.end(), begin);
  return batch(idx);
}

void Dataset::fill(std::span<const int64_t> indices, Batch& out) const {
  checkIndices(indices);
  const int64_t count = static_cast<int64_t>(indices.size());
  const Shape xs = batchShape(count);
  if (!solelyOwned(out.x) || out.x.shape() != xs || !out.x.isContiguous() ||
      out.x.dtype() != DType::F32)
    out.x = Tensor::empty(xs, DType::F32);
  if (!solelyOwned(out.y) || out.y.shape() != Shape{count} || out.y.dtype() != DType::I32)
    out.y = Tensor::empty({count}, DType::I32);
  gather(indices.data(), count, out.x.data<float>(), out.y.data<int32_t>());
}

std::vector<int32_t> labelsOf(const Dataset& ds) {
  std::vector<int32_t> labels(static_cast<size_t>(ds.size()));
  for (int64_t i = 0; i < ds.size(); ++i) labels[i] = ds.label(i);
  return labels;
}

TensorDataset::TensorDataset(Tensor x, Tensor y, int numClasses)
    : x_(x.contiguous()), y_(y.contiguous()), numClasses_(numClasses) {
  DTRAIN_CHECK(x_.dtype() == DType::F32 && x_.dim() >= 1,
               "TensorDataset: x must be F32 [N, ...], got ", dtypeName(x_.dtype()), " ",
               shapeStr(x_.shape()));
  DTRAIN_CHECK(y_.dtype() == DType::I32 && y_.dim() == 1, "TensorDataset: y must be I32 [N], got ",
               dtypeName(y_.dtype()), " ", shapeStr(y_.shape()));
  DTRAIN_CHECK(x_.size(0) == y_.size(0), "TensorDataset: ", x_.size(0), " samples but ", y_.size(0),
               " labels");
  DTRAIN_CHECK(numClasses_ >= 1, "TensorDataset: numClasses must be >= 1, got ", numClasses_);
  sampleShape_.assign(x_.shape().begin() + 1, x_.shape().end());
  const int32_t* lab = y_.data<int32_t>();
  for (int64_t i = 0; i < y_.size(0); ++i)
    DTRAIN_CHECK(lab[i] >= 0 && lab[i] < numClasses_, "TensorDataset: label ", lab[i],
                 " of sample ", i, " is outside [0, ", numClasses_, ")");
}

void TensorDataset::gather(const int64_t* indices, int64_t count, float* x, int32_t* y) const {
  const int64_t per = sampleNumel();
  const float* src = x_.data<float>();
  const int32_t* lab = y_.data<int32_t>();
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(x + i * per, src + indices[i] * per, static_cast<size_t>(per) * sizeof(float));
    y[i] = lab[indices[i]];
  }
}

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  DTRAIN_CHECK(base_ != nullptr, "SubsetDataset: null base dataset");
  for (int64_t i : indices_)
    DTRAIN_CHECK(i >= 0 && i < base_->size(), "SubsetDataset: index ", i, " out of range [0, ",
                 base_->size(), ")");
}

void SubsetDataset::gather(const int64_t* indices, int64_t count, float* x, int32_t* y) const {
  std::vector<int64_t> mapped(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) mapped[i] = indices_[indices[i]];
  base_->gather(mapped.data(), count, x, y);
}

}  // namespace dtrain::data
