// fp16: IEEE half precision (Cast.h says how it is reduced).
#include "parallel/compress/Cast.h"
#include "parallel/compress/Factories.h"
#include "tensor/Half.h"

namespace dtrain::parallel::compress {

std::unique_ptr<Compressor> makeFp16(const CompressOptions&, const BucketLayout& layout) {
  return std::make_unique<CastCompressor<DType::F16, floatToHalf, halfToFloat>>(layout);
}

int64_t halfWireBytes(const CompressOptions&, const BucketLayout& layout) {
  return layout.numel() * static_cast<int64_t>(sizeof(uint16_t));
}

}  // namespace dtrain::parallel::compress
