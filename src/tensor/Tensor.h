#pragma once
// n-d tensor: dtype, device, shape, strides (in elements), and a shared Storage.
// reshape/transpose/slice/view make views that share storage (no copy);
// contiguous() and clone() copy. Copies of a Tensor object alias the same data.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/Error.h"
#include "tensor/DType.h"
#include "tensor/Storage.h"

namespace dtrain {

using Shape = std::vector<int64_t>;

// How a tensor's values lie in memory. Plain: row-major over its shape (with
// strides). ChannelBlocked: a dense 4-d [N, C, H, W] f32 tensor, C a multiple
// of 16, stored as oneDNN's nChw16c (tensor/cpu/Blocked.h), which its
// convolutions read and write without reorders. A blocked tensor is not
// contiguous(): contiguous(), reshape() and the views give the plain values,
// reordered, so a consumer that does not know the layout reads it correctly.
enum class MemoryFormat : uint8_t { Plain, ChannelBlocked };

int64_t shapeNumel(const Shape& s);
std::string shapeStr(const Shape& s);  // "[64, 784]"

class Tensor {
 public:
  Tensor() = default;  // undefined tensor

  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, float value);
  static Tensor fromVector(const std::vector<float>& values, const Shape& shape);
  static Tensor fromInts(const std::vector<int32_t>& values, const Shape& shape);  // I32
  // A contiguous tensor over the whole of `storage` (e.g. Storage's borrowed memory).
  // Uninitialized [N, C, H, W] f32 in MemoryFormat::ChannelBlocked (C % 16 == 0).
  static Tensor emptyBlocked(const Shape& shape);
  static Tensor emptyIn(const Shape& shape, MemoryFormat format);
  static bool blockable(const Shape& shape);  // 4-d with C a positive multiple of 16
  static Tensor fromStorage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtypeSize(dtype_); }
  bool isContiguous() const;  // plain and dense (false for a blocked tensor)
  MemoryFormat format() const { return format_; }
  bool blocked() const { return format_ == MemoryFormat::ChannelBlocked; }
  // The same values in `format` (this tensor when it is in it already, else a copy).
  Tensor toFormat(MemoryFormat format) const;
  int64_t offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Typed pointer to the first element; checks the dtype.
  template <typename T> T* data() {
    checkType(dtypeOf<T>());
    return static_cast<T*>(storage_->data()) + offset_;
  }
  template <typename T> const T* data() const {
    checkType(dtypeOf<T>());
    return static_cast<const T*>(storage_->data()) + offset_;
  }
  void* rawData() { return static_cast<char*>(storage_->data()) + offset_ * dtypeSize(dtype_); }
  const void* rawData() const {
    return static_cast<const char*>(storage_->data()) + offset_ * dtypeSize(dtype_);
  }

  // Views (share storage). One dimension of `shape` may be -1.
  Tensor view(const Shape& shape) const;     // requires contiguous
  Tensor reshape(const Shape& shape) const;  // view when contiguous, else a copy
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end) const;  // [start, end)
  Tensor select(int64_t dim, int64_t index) const;               // drops `dim`
  Tensor flatten(int64_t startDim = 1) const;

  // Copies.
  Tensor contiguous() const;
  Tensor clone() const;
  void copyFrom(const Tensor& src);  // same shape; any strides or formats
  void fill(float value);
  void zero();

  // Element access for tests and small code paths (f32).
  float item() const;
  float at(std::initializer_list<int64_t> index) const;
  std::vector<float> toVector() const;

 private:
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);
  void checkType(DType t) const;
  void copyAcrossFormats(const Tensor& src);
  Tensor plainView() const;  // this, or the plain copy of a blocked tensor (for views)
  int64_t normDim(int64_t d) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_, strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  MemoryFormat format_ = MemoryFormat::Plain;
};

Shape contiguousStrides(const Shape& shape);

}  // namespace dtrain
