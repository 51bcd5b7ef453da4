#pragma once
// The compressors' constructors and payloads (bytes a bucket), one file each;
// the registry (Registry.cpp) maps names to them.
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

int64_t noneWireBytes(const CompressOptions&, const BucketLayout&);
int64_t halfWireBytes(const CompressOptions&, const BucketLayout&);  // fp16 and bf16
int64_t oneBitWireBytes(const CompressOptions&, const BucketLayout&);
int64_t signSgdWireBytes(const CompressOptions&, const BucketLayout&);
int64_t qsgdWireBytes(const CompressOptions&, const BucketLayout&);
int64_t topKWireBytes(const CompressOptions&, const BucketLayout&);
int64_t randomKWireBytes(const CompressOptions&, const BucketLayout&);
int64_t powerSgdWireBytes(const CompressOptions&, const BucketLayout&);

}  // namespace dtrain::parallel::compress
