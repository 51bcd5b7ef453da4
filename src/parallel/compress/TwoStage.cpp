#include "parallel/compress/TwoStage.h"

#include <algorithm>
#include <numeric>

#include "core/Error.h"
#include "parallel/compress/CompressorBasics.h"

namespace dtrain::parallel::compress {
namespace {

MessageCodec& codec(Compressor& c) { return dynamic_cast<MessageCodec&>(c); }

// The parameters' pieces within [begin, end) of the bucket, as 1-D shapes:
// the chunked quantizers then never mix two parameters in a chunk.
BucketLayout partLayout(const BucketLayout& layout, int64_t begin, int64_t end, int index) {
  BucketLayout part;
  part.index = index;
  int64_t offset = 0;
  for (const auto& shape : layout.shapes) {
    const int64_t n = shapeNumel(shape);
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + n);
    if (lo < hi) part.shapes.push_back({hi - lo});
    offset += n;
  }
  return part;
}

}  // namespace

TwoStageCompressor::TwoStageCompressor(const CompressOptions& options, const BucketLayout& layout)
    : n_(options.commSize), rank_(options.commRank), total_(layout.numel()) {
  DTRAIN_CHECK(n_ >= 1 && rank_ >= 0 && rank_ < n_, "two-stage compression: rank ", rank_, " of ",
               n_);
  CompressOptions inner = options;
  inner.collective = "allgather";
  // Cuts on whole chunks of the flat bucket, near an even split.
  const int64_t chunks = (total_ + kChunk - 1) / kChunk;
  for (int r = 0; r < n_; ++r) {
    Part p;
    p.begin = std::min(total_, chunks * r / n_ * kChunk);
    p.end = r + 1 == n_ ? total_ : std::min(total_, chunks * (r + 1) / n_ * kChunk);
    if (p.end > p.begin) {
      // Partition r's codecs have a bucket index of their own (seeds).
      const BucketLayout l = partLayout(layout, p.begin, p.end, layout.index * n_ + r);
      p.stage1 = makeCompressor(inner, l);
      p.bytes = codec(*p.stage1).messageBytes();
      // The owner's second encoder: the same layout (so the same message size
      // and decoder), its own error feedback; the index keeps its seeds apart.
      if (r == rank_) {
        BucketLayout l2 = l;
        l2.index = -1 - l.index;
        stage2_ = makeCompressor(inner, l2);
      }
    }
    parts_.push_back(std::move(p));
  }
}

void TwoStageCompressor::reduce(float* grad, comm::Communicator& comm, const ReduceContext& ctx) {
  DTRAIN_CHECK(comm.size() == n_ && comm.rank() == rank_, "two-stage compression planned for rank ",
               rank_, " of ", n_, ", called on rank ", comm.rank(), " of ", comm.size());
  comm::Options o;
  o.tag = ctx.tag;
  size_t slot = 0;  // alltoall needs one size: the largest partition's message
  for (const Part& p : parts_) slot = std::max(slot, p.bytes);
  // Stage 1: partition r of this rank's gradient, encoded, goes to rank r.
  send_.assign(slot * n_, 0);
  recv_.resize(slot * n_);
  for (int r = 0; r < n_; ++r)
    if (parts_[r].stage1)
      codec(*parts_[r].stage1).encodeMessage(grad + parts_[r].begin, send_.data() + slot * r,
                                             ctx.step, rank_);
  if (slot > 0) comm.alltoall(send_.data(), recv_.data(), slot, DType::U8, o);
  // Stage 2: this rank's partition averaged over the ranks (in rank order),
  // encoded again; every rank gets every partition's message.
  const Part& mine = parts_[rank_];
  std::vector<size_t> counts(n_);
  size_t myOffset = 0;
  for (int r = 0; r < n_; ++r) {
    counts[r] = parts_[r].bytes;
    if (r < rank_) myOffset += counts[r];
  }
  gathered_.assign(myOffset + std::accumulate(counts.begin() + rank_, counts.end(), size_t{0}), 0);
  if (mine.stage1) {
    mean_.assign(static_cast<size_t>(mine.end - mine.begin), 0.0f);
    for (int j = 0; j < n_; ++j) codec(*mine.stage1).decodeAdd(recv_.data() + slot * j, mean_.data());
    const float scale = 1.0f / static_cast<float>(n_);
    for (float& v : mean_) v *= scale;
    codec(*stage2_).encodeMessage(mean_.data(), gathered_.data() + myOffset, ctx.step, rank_);
  }
  if (!gathered_.empty())
    comm.allgatherv(gathered_.data() + myOffset, gathered_.data(), counts, DType::U8, o);
  std::fill(grad, grad + total_, 0.0f);
  size_t offset = 0;
  for (int r = 0; r < n_; ++r) {
    if (parts_[r].stage1) codec(*parts_[r].stage1).decodeAdd(gathered_.data() + offset, grad + parts_[r].begin);
    offset += counts[r];
  }
  // What this rank handed to the collectives: one message per partition, and
  // its partition's average.
  traffic_ = {};
  for (const Part& p : parts_) traffic_.payload += static_cast<int64_t>(p.bytes);
  traffic_.payload += static_cast<int64_t>(mine.bytes);
}

std::vector<std::pair<std::string, Tensor*>> TwoStageCompressor::state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (int r = 0; r < n_; ++r)
    if (parts_[r].stage1)
      for (auto& [name, t] : parts_[r].stage1->state())
        out.emplace_back(detail::concat("stage1.part", r, ".", name), t);
  if (stage2_)
    for (auto& [name, t] : stage2_->state()) out.emplace_back("stage2." + name, t);
  return out;
}

}  // namespace dtrain::parallel::compress
