#pragma once
// A refcounted, aligned, accounted buffer. Tensors are views onto a Storage.
#include <cstddef>
#include <memory>

#include "tensor/DType.h"

namespace dtrain {

class Storage {
 public:
  Storage(size_t bytes, Device device);
  // Memory someone else owns (a NumPy array's buffer, from Python): `owner`
  // keeps it alive while any view of this storage lives; never freed or
  // accounted here, and release()/reallocate() leave it alone.
  Storage(void* borrowed, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // Fully sharded parameters (ZeRO-3, FSDP): the memory goes and comes back
  // while every view of this storage (those saved by autograd nodes too)
  // stays valid as an object; the views read the new memory once it is back.
  // Accounted to the tag it was first allocated under. Contents are lost.
  void release();
  void reallocate();
  bool resident() const { return data_ != nullptr; }
  bool borrowed() const { return owner_ != nullptr; }

 private:
  memory::Tag tag_;  // the domain and category it was allocated under, released to
  std::shared_ptr<memory::OffloadFile> offload_;  // keeps tag_.offload alive
  std::shared_ptr<void> owner_;  // borrowed memory's owner (null: allocated here)
  void* data_;
  size_t bytes_;
  Device device_;
};

}  // namespace dtrain
