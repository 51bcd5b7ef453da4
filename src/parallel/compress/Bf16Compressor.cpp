// bf16: bfloat16, fp32's exponent range with 8 bits of mantissa (Cast.h says how
// it is reduced).
#include "parallel/compress/Cast.h"
#include "parallel/compress/Factories.h"
#include "tensor/Half.h"

namespace dtrain::parallel::compress {

std::unique_ptr<Compressor> makeBf16(const CompressOptions&, const BucketLayout& layout) {
  return std::make_unique<CastCompressor<DType::BF16, floatToBf16, bf16ToFloat>>(layout);
}

}  // namespace dtrain::parallel::compress
