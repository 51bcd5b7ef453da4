#pragma once
// --compress-collective two-stage: the compressed allreduce of 1-bit Adam (Tang
// et al. 2021) for the compressors whose messages cannot be summed (onebit,
// signsgd, qsgd, topk), instead of the allgather of every rank's message:
//   1. the bucket is cut into N partitions; each rank encodes partition r with
//      a codec of its own (error feedback per partition: the "worker" error)
//      and sends it to rank r (alltoall);
//   2. rank r decodes the N messages of its partition, averages them in rank
//      order, encodes the average (a second error feedback: the "server"
//      error) and every rank gets every partition's message (allgatherv) and
//      decodes it.
// Every rank ends with the same bits. Bytes per rank and step: about 2 (N-1)/N
// messages instead of the allgather's N-1, so it wins from N = 3 on and its
// cost stays flat as N grows; the price is a second quantization.
#include <memory>
#include <vector>

#include "parallel/compress/Compressor.h"

namespace dtrain::parallel::compress {

class TwoStageCompressor final : public Compressor {
 public:
  // For rank options.commRank of options.commSize; options.name must be an allgather
  // compressor (onebit, signsgd, qsgd, topk).
  TwoStageCompressor(const CompressOptions& options, const BucketLayout& layout);
  void reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) override;
  // "stage1.part<r>.residual" (per partition) and "stage2.residual", where the
  // compressor keeps error feedback.
  std::vector<std::pair<std::string, Tensor*>> state() override;

 private:
  struct Part {
    int64_t begin = 0, end = 0;  // range of the bucket's flat gradient
    std::unique_ptr<Compressor> stage1;  // this rank's encoder of the partition
    size_t bytes = 0;                    // one message of the partition
  };
  int n_, rank_;
  int64_t total_;
  std::vector<Part> parts_;
  std::unique_ptr<Compressor> stage2_;  // encodes the average of this rank's partition
  std::vector<uint8_t> send_, recv_, gathered_;
  std::vector<float> mean_;
};

}  // namespace dtrain::parallel::compress
