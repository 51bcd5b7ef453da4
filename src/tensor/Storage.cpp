#include "tensor/Storage.h"

namespace dtrain {

Storage::Storage(size_t bytes, Device device)
    : data_(memory::allocate(bytes, device.type)), bytes_(bytes), device_(device) {}

Storage::~Storage() { memory::release(data_, bytes_, device_.type); }

}  // namespace dtrain
