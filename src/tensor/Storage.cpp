#include "tensor/Storage.h"

#include "core/Offload.h"

namespace dtrain {

Storage::Storage(size_t bytes, Device device)
    : tag_(memory::currentTag()),
      data_(memory::allocate(bytes, device.type, tag_)),
      bytes_(bytes),
      device_(device) {
  if (tag_.offload) offload_ = tag_.offload->shared_from_this();
}

Storage::Storage(void* borrowed, size_t bytes, std::shared_ptr<void> owner)
    : owner_(std::move(owner)), data_(borrowed), bytes_(bytes), device_(Device::cpu()) {}

Storage::~Storage() {
  if (owner_) return;  // the owner frees it (its shared_ptr goes with this object)
  release();
}

void Storage::release() {
  if (owner_) return;
  if (data_) memory::release(data_, bytes_, device_.type, tag_);
  data_ = nullptr;
}

void Storage::reallocate() {
  if (owner_) return;
  if (!data_) data_ = memory::allocate(bytes_, device_.type, tag_);
}

}  // namespace dtrain
