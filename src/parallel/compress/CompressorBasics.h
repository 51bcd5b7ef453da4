#pragma once
// Pieces several compressors share: chunking, seeds, bit packing, error feedback.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <vector>

#include "parallel/compress/Compressor.h"
#include "tensor/Tensor.h"

namespace dtrain::parallel::compress {

// Values per chunk of the per-chunk quantizers (onebit, signsgd, qsgd): each
// chunk gets its own reconstruction values / norm, so one large gradient does
// not flatten the small ones (QSGD's bucket size d = 512). Chunks never span two
// parameters: a bias and a weight matrix have gradients of different scales.
inline constexpr int64_t kChunk = 512;
// Chunk c of a bucket is [bounds[c], bounds[c+1]): each parameter cut in kChunk pieces.
std::vector<int64_t> chunkBounds(const BucketLayout& layout);
// How many chunks that is (chunkBounds(layout).size() - 1, without the bounds).
int64_t chunkCount(const BucketLayout& layout);

// Values kept by the sparsifiers (topk, randomk): ceil(ratio * n), at least 1.
inline int64_t keptCount(double ratio, int64_t n) {
  const auto k = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(n)));
  return std::clamp<int64_t>(k, 1, std::max<int64_t>(1, n));
}

// A seed for (run seed, a, b, c): the same numbers on every rank that passes the
// same arguments, and for a resumed run (no RNG state to checkpoint).
uint64_t mixSeed(uint64_t seed, int64_t a, int64_t b, int64_t c);

// n codes of `bits` bits each (1..16), packed little-endian bit by bit.
inline size_t packedBytes(size_t n, int bits) { return (n * static_cast<size_t>(bits) + 7) / 8; }
void packCodes(const uint32_t* codes, size_t n, int bits, uint8_t* out);
void unpackCodes(const uint8_t* packed, size_t n, int bits, uint32_t* codes);

// Floats at the start of a byte message (messages are byte buffers of any length).
inline void putFloats(uint8_t* msg, const float* v, size_t n) { std::memcpy(msg, v, n * sizeof(float)); }
inline void getFloats(const uint8_t* msg, float* v, size_t n) { std::memcpy(v, msg, n * sizeof(float)); }

// The uncompressed mean: allreduce(sum) of n floats in place, then x 1/N (DataParallel's
// path before compression existed, bit for bit); adds the bytes to `traffic`.
void allreduceMean(float* data, size_t n, comm::Communicator& comm, const ReduceContext& ctx,
                   Traffic& traffic);

// Error feedback (Seide et al. 2014; Karimireddy et al. 2019): what compression
// dropped this step is added to the next step's gradient, so nothing is lost,
// only delayed:  x = g + r;  send C(x);  r' = x - C(x).
class ErrorFeedback {
 public:
  explicit ErrorFeedback(int64_t n) : residual_(Tensor::zeros({n})) {}
  // grad += residual (grad becomes x).
  void addTo(float* grad) const;
  // residual = x - sent.
  void update(const float* x, const float* sent);
  Tensor& residual() { return residual_; }

 private:
  Tensor residual_;
};

}  // namespace dtrain::parallel::compress
