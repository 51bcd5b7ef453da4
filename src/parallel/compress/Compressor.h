#pragma once
// Gradient compression for the allreduce strategy (--compress NAME): one
// Compressor per fusion bucket, created by name from the registry (Registry.cpp),
// run on DataParallel's communication thread when the bucket is ready.
//
// A compressor replaces the plain "allreduce(sum) then x 1/N" of a bucket: it
// encodes this rank's gradient, moves the encoded messages with the collective
// that aggregates them correctly (each compressor's file says which and why),
// and leaves in the bucket the same averaged, decoded gradient on every rank,
// so replicas stay identical. State that lives across steps (error-feedback
// residuals, PowerSGD's Q factors) belongs to the compressor, one per bucket,
// and is exposed by state() for checkpoints.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/Communicator.h"
#include "tensor/Tensor.h"

namespace dtrain::parallel::compress {

// PowerSGD's rank for a [rows, cols] matrix: min(rank, rows, cols) where its
// factors, that rank x (rows + cols) values, shrink it minCompressionRate-fold;
// 0 where it goes whole (PyTorch's min_compression_rate).
inline int64_t powerSgdRank(int64_t rows, int64_t cols, int64_t rank, double minCompressionRate) {
  const int64_t r = std::min({rank, rows, cols});
  return static_cast<double>((rows + cols) * r) * minCompressionRate < static_cast<double>(rows * cols) ? r : 0;
}

// The --compress flags.
struct CompressOptions {
  std::string name = "none";
  int bits = 4;                  // qsgd: 2^bits - 1 levels per chunk
  double ratio = 0.01;           // topk, randomk: fraction of the values sent
  int rank = 1;                  // powersgd: rank of the P/Q factors
  int64_t startStep = 10;        // powersgd: steps of plain allreduce first (PyTorch's default)
  double minCompressionRate = 2; // powersgd: a matrix is compressed only when n*m >= this * (n+m)*rank
  uint64_t seed = 0;             // randomk, qsgd, powersgd's initial Q (the run's --seed)
  // How the allgather compressors aggregate: "allgather" (every rank's message
  // to every rank) or "two-stage" (TwoStage.h: compressed reduce-scatter, then
  // allgather of the compressed averages).
  std::string collective = "allgather";
  // Set by the strategy: this rank and the ranks of the bucket's communicator.
  int commRank = 0, commSize = 1;
};

// What a compressor knows of its bucket: the parameters' shapes, in bucket order.
struct BucketLayout {
  int index = 0;  // bucket index (seeds, state names)
  std::vector<std::vector<int64_t>> shapes;
  int64_t numel() const;
};

// Per call: the collective's tag and allreduce algorithm, the training step.
struct ReduceContext {
  int tag = 0;
  comm::Algorithm algo = comm::Algorithm::Auto;
  int64_t step = 0;
};

// Bytes of one bucket's communication on this rank: what it handed to the
// collectives (its compressed message). What really went over the wire is
// counted by the communicator (Communicator::bytesSent).
struct Traffic {
  int64_t payload = 0;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  // grad holds this rank's gradient of the bucket (layout.numel() floats). On
  // return it holds, identically on every rank of comm, the mean over ranks of
  // what each rank sent, decoded. Collective: every rank calls it in the same order.
  virtual void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) = 0;
  // The bytes of the last reduce().
  const Traffic& traffic() const { return traffic_; }
  // Tensors carried across steps, by name (checkpoints save and restore them in place).
  virtual std::vector<std::pair<std::string, Tensor*>> state() { return {}; }

 protected:
  Traffic traffic_;
};

// The point-to-point form of a compressor, for parameter-server pushes: a
// worker encodes its gradient (of one server's shard) into one message, the
// server decodes it; no collective, so only compressors whose message decodes
// on its own implement it (the allgather ones and the casts; not randomk, whose
// indices come from a shared seed, nor powersgd, whose factors need the sum).
class MessageCodec {
 public:
  virtual ~MessageCodec() = default;
  // Bytes of one message (the same for every call).
  virtual size_t messageBytes() const = 0;
  // Encodes grad into msg. With error feedback, grad += residual first and the
  // residual becomes what the message does not carry (grad is clobbered).
  // `sender` and `step` seed stochastic encoders.
  virtual void encodeMessage(float* grad, uint8_t* msg, int64_t step, int sender) = 0;
  // out += the decoded message.
  virtual void decodeAdd(const uint8_t* msg, float* out) const = 0;
};

using CompressorFactory =
    std::unique_ptr<Compressor> (*)(const CompressOptions&, const BucketLayout&);
// A compressor's payload a bucket (wireBytes), from its options and shapes alone.
using WireBytesOf = int64_t (*)(const CompressOptions&, const BucketLayout&);

// Registered names, in registry order ("none", "fp16", ...).
std::vector<std::string> compressorNames();
// One line per name for --help.
std::string describeCompressors();
// Whether the compressor aggregates by allgathering every rank's message
// (false for an unknown name).
bool compressorGathers(const std::string& name);
// The bytes one rank hands to the collectives for a bucket of `layout` (its
// Traffic::payload; PowerSGD's once its plain steps are over): what the
// simulator charges a compressed bucket. UsageError on an unknown name.
int64_t wireBytes(const CompressOptions& options, const BucketLayout& layout);
// Throws UsageError naming the flag on an unknown name or a bad value.
void validate(const CompressOptions& options);
std::unique_ptr<Compressor> makeCompressor(const CompressOptions& options,
                                           const BucketLayout& layout);
// Throws UsageError unless the compressor `name` has a MessageCodec
// (parameter-server pushes), naming those that have one.
void requireMessageCodec(const std::string& name);
std::unique_ptr<MessageCodec> makeMessageCodec(const CompressOptions& options,
                                               const BucketLayout& layout);

}  // namespace dtrain::parallel::compress
