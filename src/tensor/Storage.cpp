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

Storage::~Storage() { release(); }

void Storage::release() {
  if (data_) memory::release(data_, bytes_, device_.type, tag_);
  data_ = nullptr;
}

void Storage::reallocate() {
  if (!data_) data_ = memory::allocate(bytes_, device_.type, tag_);
}

}  // namespace dtrain
