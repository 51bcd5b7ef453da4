#pragma once
// A grow-only scratch buffer for kernel workspaces, allocated through
// memory::allocate so that its bytes count in the memory statistics like any
// tensor's. Growing discards the contents (callers initialize what they use).
#include <cstddef>
#include <cstdint>

#include "core/Memory.h"

namespace dtrain {

template <typename T>
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer() { memory::release(data_, capacity_ * sizeof(T)); }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  // At least n elements (uninitialized when it had to grow).
  T* grow(int64_t n) {
    const size_t need = n > 0 ? static_cast<size_t>(n) : 0;
    if (need > capacity_) {
      memory::release(data_, capacity_ * sizeof(T));
      data_ = nullptr;
      capacity_ = 0;
      data_ = static_cast<T*>(memory::allocate(need * sizeof(T)));
      capacity_ = need;
    }
    return data_;
  }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace dtrain
