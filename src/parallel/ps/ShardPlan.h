#pragma once
// How the parameters are partitioned across the parameter servers.
//
// The parameters, in the model's order, are laid end to end in one virtual
// vector of `total` floats, and server s owns the contiguous range
// [begin(s), end(s)) with cut points near s * total / S (rounded to 16 floats,
// one cache line). So every server holds total/S floats (within 16), a large
// tensor is split into ranges across servers, and small tensors next to each
// other travel in one message per server. A server's range is a list of
// slices (parameter, offset, length); the same plan is computed on every rank
// from the parameter sizes alone.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain::parallel::ps {

struct ShardSlice {
  size_t param = 0;         // index in the model's parameter order
  int64_t offset = 0;       // first element within the parameter
  int64_t length = 0;       // elements
  int64_t shardOffset = 0;  // where the slice starts in the server's buffer
};

struct ShardPlan {
  int64_t total = 0;
  std::vector<int64_t> begin;                    // per server: first flat element
  std::vector<std::vector<ShardSlice>> slices;   // per server
  int servers() const { return static_cast<int>(slices.size()); }
  int64_t shardSize(int s) const {
    return (s + 1 < servers() ? begin[s + 1] : total) - begin[s];
  }
};

// Copies server s's slices between per-parameter arrays (in model order) and
// its flat shard buffer: gather (params -> shard), add (shard += params),
// scatter (shard -> params).
void gatherShard(const ShardPlan& plan, int s, const std::vector<const float*>& params, float* shard);
void addToShard(const ShardPlan& plan, int s, const std::vector<const float*>& params, float* shard);
void scatterShard(const ShardPlan& plan, int s, const float* shard, const std::vector<float*>& params);

// Throws UsageError when there are more servers than floats to serve.
ShardPlan planShards(const std::vector<int64_t>& paramSizes, int servers);

}  // namespace dtrain::parallel::ps
