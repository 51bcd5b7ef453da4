#pragma once
// One bit per value (x >= 0 or not) plus, per chunk of kChunk values, the
// values the two bit states decode to: the shared encoding of onebit and
// signsgd, which differ only in those reconstruction values. Always with error
// feedback: one bit alone loses too much to converge without it.
// Message: per chunk `levels` floats, then numel bits.
#include "parallel/compress/Gather.h"

namespace dtrain::parallel::compress {

// The message's bytes for a bucket of `layout` with `levels` floats a chunk.
int64_t signBitsWireBytes(const BucketLayout& layout, int levels);

class SignBitsCompressor : public GatherCompressor {
 protected:
  // levels: floats sent per chunk, 1 (decode to +v / -v) or 2 (to hi / lo).
  SignBitsCompressor(const BucketLayout& layout, int levels);
  // The chunk's reconstruction values for x >= 0 (hi) and x < 0 (lo).
  virtual void reconstruction(const float* x, int64_t n, float& hi, float& lo) const = 0;

 private:
  size_t messageBytes() const override;
  void encode(const float* x, uint8_t* msg, const ReduceContext& ctx, int rank) override;
  void decodeAdd(const uint8_t* msg, float* out) const override;

  const int levels_;
};

}  // namespace dtrain::parallel::compress
