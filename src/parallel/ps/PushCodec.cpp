#include "parallel/ps/PushCodec.h"

#include <algorithm>
#include <cstring>

#include "parallel/ps/Protocol.h"

namespace dtrain::parallel::ps {

std::unique_ptr<PushCodec> PushCodec::make(const PsOptions& opts, const ShardPlan& plan,
                                           int server) {
  if (opts.compress.name == "none") return nullptr;
  // One "bucket" per server shard; its slices are the compressor's tensors, so
  // per-chunk quantizers never mix two parameters.
  compress::CompressOptions options = opts.compress;
  options.collective = "allgather";  // one message to one server
  compress::BucketLayout layout;
  layout.index = server;
  for (const ShardSlice& sl : plan.slices[server]) layout.shapes.push_back({sl.length});
  return std::unique_ptr<PushCodec>(
      new PushCodec(compress::makeMessageCodec(options, layout), plan.shardSize(server)));
}

PushCodec::PushCodec(std::unique_ptr<compress::MessageCodec> codec, int64_t shardSize)
    : codec_(std::move(codec)), shardSize_(shardSize) {
  const auto bytes = static_cast<int64_t>(codec_->messageBytes());
  floats_ = kHeaderFloats + (bytes + static_cast<int64_t>(sizeof(float)) - 1) /
                                static_cast<int64_t>(sizeof(float));
}

void PushCodec::encode(float* payload, float* msg, int64_t step, int worker) {
  codec_->encodeMessage(payload, reinterpret_cast<uint8_t*>(msg + kHeaderFloats), step, worker);
}

void PushCodec::decodeInPlace(float* msg) {
  const auto* encoded = reinterpret_cast<const uint8_t*>(msg + kHeaderFloats);
  scratch_.assign(encoded, encoded + codec_->messageBytes());
  float* out = msg + kHeaderFloats;
  std::fill(out, out + shardSize_, 0.0f);
  codec_->decodeAdd(scratch_.data(), out);
}

}  // namespace dtrain::parallel::ps
