#include "parallel/ps/ShardPlan.h"

#include <algorithm>

#include "core/Error.h"

namespace dtrain::parallel::ps {

ShardPlan planShards(const std::vector<int64_t>& paramSizes, int servers) {
  DTRAIN_CHECK_USAGE(servers >= 1, "--servers must be >= 1 (got ", servers, ")");
  ShardPlan plan;
  for (int64_t n : paramSizes) plan.total += n;
  DTRAIN_CHECK_USAGE(plan.total >= servers, "--servers ", servers, ": the model has only ",
                     plan.total, " parameters to share out");
  constexpr int64_t kAlign = 16;
  plan.begin.resize(servers);
  for (int s = 0; s < servers; ++s) {
    int64_t cut = plan.total * s / servers;
    if (plan.total >= kAlign * servers) cut = cut / kAlign * kAlign;
    plan.begin[s] = cut;
  }
  plan.slices.resize(servers);
  int64_t paramStart = 0;
  for (size_t p = 0; p < paramSizes.size(); ++p) {
    const int64_t paramEnd = paramStart + paramSizes[p];
    for (int s = 0; s < servers; ++s) {
      const int64_t lo = std::max(paramStart, plan.begin[s]);
      const int64_t hi = std::min(paramEnd, s + 1 < servers ? plan.begin[s + 1] : plan.total);
      if (lo < hi)
        plan.slices[s].push_back({p, lo - paramStart, hi - lo, lo - plan.begin[s]});
    }
    paramStart = paramEnd;
  }
  return plan;
}

void gatherShard(const ShardPlan& plan, int s, const std::vector<const float*>& params,
                 float* shard) {
  for (const ShardSlice& sl : plan.slices[s])
    std::copy_n(params[sl.param] + sl.offset, sl.length, shard + sl.shardOffset);
}

void addToShard(const ShardPlan& plan, int s, const std::vector<const float*>& params,
                float* shard) {
  for (const ShardSlice& sl : plan.slices[s]) {
    const float* __restrict src = params[sl.param] + sl.offset;
    float* __restrict dst = shard + sl.shardOffset;
    for (int64_t i = 0; i < sl.length; ++i) dst[i] += src[i];
  }
}

void scatterShard(const ShardPlan& plan, int s, const float* shard,
                  const std::vector<float*>& params) {
  for (const ShardSlice& sl : plan.slices[s])
    std::copy_n(shard + sl.shardOffset, sl.length, params[sl.param] + sl.offset);
}

}  // namespace dtrain::parallel::ps
