#include "parallel/allreduce/FusionBuckets.h"

#include "core/Error.h"

namespace dtrain::parallel {

std::vector<size_t> fusionBucketStarts(const std::vector<double>& bytes, double bucketBytes,
                                       const std::vector<char>& alone) {
  DTRAIN_CHECK(bucketBytes > 0, "fusion buckets need a positive size");
  std::vector<size_t> starts;
  double open = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const bool isolated = i < alone.size() && alone[i];
    if (starts.empty() || open >= bucketBytes || isolated) {
      starts.push_back(i);
      open = 0;
    }
    // An isolated tensor closes its bucket behind it.
    open = isolated ? bucketBytes : open + bytes[i];
  }
  return starts;
}

std::vector<FusionBucket> makeFusionBuckets(
    const std::vector<autograd::Variable>& params, size_t bucketBytes, int64_t padTo,
    const std::function<bool(const autograd::Variable&)>& isolate) {
  // Group first (reverse registration order = the order gradients become final).
  std::vector<autograd::Variable> ordered;
  std::vector<double> bytes;
  std::vector<char> alone;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (!it->requiresGrad()) continue;
    ordered.push_back(*it);
    bytes.push_back(static_cast<double>(it->numel()) * sizeof(float));
    alone.push_back(isolate && isolate(*it));
  }
  const std::vector<size_t> starts = fusionBucketStarts(bytes, static_cast<double>(bucketBytes), alone);
  std::vector<std::vector<autograd::Variable>> groups;
  for (size_t b = 0; b < starts.size(); ++b)
    groups.emplace_back(ordered.begin() + static_cast<std::ptrdiff_t>(starts[b]),
                        b + 1 < starts.size() ? ordered.begin() + static_cast<std::ptrdiff_t>(starts[b + 1])
                                              : ordered.end());
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
