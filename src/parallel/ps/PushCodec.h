#pragma once
// --compress on parameter-server pushes: a worker encodes each server's shard
// of its gradient with the compressor's MessageCodec (error feedback, where the
// compressor has it, kept per server shard on the worker); the server decodes
// it into the buffer it applies. Parameters travel back uncompressed: the
// lecture notes' (and Downpour's) bottleneck is the many workers' pushes
// converging on the servers.
#include <memory>

#include "parallel/compress/Compressor.h"
#include "parallel/ps/PsOptions.h"
#include "parallel/ps/ShardPlan.h"

namespace dtrain::parallel::ps {

class PushCodec {
 public:
  // Null when opts.compress.name is "none" (fp32 pushes, the unchanged path).
  static std::unique_ptr<PushCodec> make(const PsOptions& opts, const ShardPlan& plan, int server);
  // Floats of a push message: header + the encoded shard, rounded up to floats.
  int64_t messageFloats() const { return floats_; }
  // payload (the shard's gradient, clobbered by error feedback) -> msg's payload.
  void encode(float* payload, float* msg, int64_t step, int worker);
  // Decodes msg's payload in place into shardSize floats (the buffer holds
  // max(shardSize, encoded) floats after the header).
  void decodeInPlace(float* msg);

 private:
  PushCodec(std::unique_ptr<compress::MessageCodec> codec, int64_t shardSize);
  std::unique_ptr<compress::MessageCodec> codec_;
  int64_t shardSize_, floats_;
  std::vector<uint8_t> scratch_;
};

}  // namespace dtrain::parallel::ps
