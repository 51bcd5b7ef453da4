#pragma once
// The compressors' constructors, one per file; the registry (Registry.cpp) maps
// names to them.
#include "parallel/compress/Compressor.h"

namespace dtrain::parallel::compress {

std::unique_ptr<Compressor> makeNone(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makeFp16(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makeBf16(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makeOneBit(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makeSignSgd(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makeQsgd(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makeTopK(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makeRandomK(const CompressOptions&, const BucketLayout&);
std::unique_ptr<Compressor> makePowerSgd(const CompressOptions&, const BucketLayout&);

}  // namespace dtrain::parallel::compress
