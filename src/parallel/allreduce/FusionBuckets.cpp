#include "parallel/allreduce/FusionBuckets.h"

#include "core/Error.h"

namespace dtrain::parallel {

std::vector<FusionBucket> makeFusionBuckets(
    const std::vector<autograd::Variable>& params, size_t bucketBytes, int64_t padTo,
    const std::function<bool(const autograd::Variable&)>& isolate) {
  DTRAIN_CHECK(bucketBytes > 0, "fusion buckets need a positive size");
  // Group first (reverse registration order = the order gradients become final).
  std::vector<std::vector<autograd::Variable>> groups;
  size_t open = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (!it->requiresGrad()) continue;
    const bool alone = isolate && isolate(*it);
    if (groups.empty() || open >= bucketBytes || alone) {
      groups.emplace_back();
      open = 0;
    }
    groups.back().push_back(*it);
    // An isolated parameter closes its bucket behind it.
    open = alone ? bucketBytes : open + static_cast<size_t>(it->numel()) * sizeof(float);
  }
  memory::CategoryScope accounted(memory::Category::Gradients);
  std::vector<FusionBucket> buckets;
  buckets.reserve(groups.size());
  for (auto& g : groups) {
    int64_t n = 0;
    for (auto& p : g) n += p.numel();
    FusionBucket b;
    b.buffer = Tensor::zeros({(n + padTo - 1) / padTo * padTo});
    int64_t off = 0;
    for (auto& p : g) {
      // setGradBuffer copies the current gradient in, so nothing accumulated is lost.
      p.setGradBuffer(b.buffer.slice(0, off, off + p.numel()).view(p.shape()));
      off += p.numel();
    }
    b.params = std::move(g);
    buckets.push_back(std::move(b));
  }
  return buckets;
}

}  // namespace dtrain::parallel
