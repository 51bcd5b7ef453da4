// The gradient sync of the allreduce family (data parallelism, the replicas
// of a pipeline or tensor-parallel mesh, local SGD): fusion buckets, each its
// own allreduce (or ZeRO's reduce-scatter and allgathers), compressed, overlapped
// with backward where the cores allow it, sufficient factors where they pay.
#include <algorithm>

#include "parallel/allreduce/SufficientFactors.h"
#include "parallel/compress/Compressor.h"
#include "parallel/localsgd/LocalSgdConfig.h"
#include "plan/Collectives.h"
#include "plan/Layout.h"
#include "plan/MemoryModel.h"
#include "plan/costs/StrategyCost.h"
#include "runtime/Trainer.h"

namespace dtrain::plan {

namespace {

// The model's weight matrices [rows, cols], as the trainer's buckets hold them:
// each Linear's weight [out, in], each embedding table.
std::vector<std::pair<int64_t, int64_t>> weightMatrices(const AnalyticModel& p) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const AnalyticLayer& layer : p.layers) {
    for (const auto& [in, outs] : layer.linears) out.emplace_back(outs, in);
    for (const auto& [rows, cols] : layer.tables) out.emplace_back(rows, cols);
  }
  return out;
}

// The elements of the matrices PowerSGD factors (parallel/compress/PowerSgd.cpp,
// by its own rule, powerSgdRank); the rest it sends whole.
double powerSgdFactoredParams(const runtime::TrainConfig& c, const AnalyticModel& p) {
  const auto o = runtime::compressOptions(c);
  double n = 0;
  for (const auto& [rows, cols] : weightMatrices(p))
    if (parallel::compress::powerSgdRank(rows, cols, o.rank, o.minCompressionRate) > 0)
      n += static_cast<double>(rows) * static_cast<double>(cols);
  return n;
}

// PowerSGD's own work on the communication thread, per step: for each
// factored weight the error feedback (x = g + e), M Q, M^T P and the error
// e = x - P Q^T each stream the matrix through memory (7 passes of 4 bytes; the
// rank-r products are too thin to be compute-bound).
double powerSgdEncodeSeconds(const runtime::TrainConfig& c, const Machine& m, const AnalyticModel& p, double share) {
  return 7 * 4 * powerSgdFactoredParams(c, p) / m.memoryBytesPerS * share;
}

// ZeRO 3 (parallel/zero): the units forward used last stay gathered into
// backward: the last layer, and for a language model the last block and the
// embedding (lm_head's tied weight is used at the end of forward). Per layer,
// whether backward gathers it again.
bool zero3Regathers(const AnalyticModel& p, const Layout& l, int layer) {
  if (l.pp > 1) return true;
  const int n = static_cast<int>(p.layers.size());
  if (layer == n - 1) return false;
  return !(p.languageModel && n >= 3 && (layer == n - 2 || layer == 0));
}

// --sfb (parallel/allreduce/SufficientFactors.h): the Linear weights whose B
// factor rows per rank are allgathered instead of their gradient allreduced
// (one allgather per layer, as the trainer does), and the GEMM that rebuilds
// each weight's gradient from all ranks' rows.
struct SufficientFactorCost {
  double weightParams = 0, seconds = 0, bytesPerRank = 0, rebuildS = 0;
};
SufficientFactorCost sufficientFactors(const SyncContext& x, const RankGroup& g) {
  const auto& c = x.rc.train;
  const Layout& l = x.l;
  SufficientFactorCost out;
  const int64_t rows = c.batchSize * c.accumulate * x.p.tokensPerSample;
  for (const auto& [in, outputs] : factorLayers(x.p, c.sfb, rows, l.dp)) {
    const double msg = 4.0 * static_cast<double>(rows * (in + outputs));
    out.weightParams += static_cast<double>(in * outputs);
    out.seconds += allgatherTime(x.m, l.placement, g, msg * l.dp);
    out.bytesPerRank += msg * (l.dp - 1);
    out.rebuildS += 2.0 * static_cast<double>(in * outputs) * static_cast<double>(rows * l.dp) /
                    (x.m.flops(c.precision) / x.computeShare);
  }
  return out;
}

// Whether buckets sent during backward (--overlap) go beside it: not where
// the emulated hosts' ranks keep every shared core computing (the transfers
// wait for cores then: TCP and MPI's progress run on them).
bool coresFreeForOverlap(const Machine& m, const Layout& l) { return m.sharedCores == 0 || l.ranks < m.sharedCores; }

// Where the hosts' links idled through the step's compute (no tensor sums or
// pipeline messages on them, no bucket sent during backward: not with
// --overlap on free cores, not ZeRO's reduce-scatters), netsim's token bucket
// is full when the sync starts: the first calls' bytes pass at once, up to the
// bucket (calibrate's fits are calls back to back, the bucket drained).
class BucketCredit {
 public:
  BucketCredit(const SyncContext& x, const RankGroup& g, double computeS) : x_(x), g_(g) {
    const auto& c = x.rc.train;
    const LinkCost& inter = x.m.link(LinkKind::InterHost);
    const bool linkIdled =
        x.l.pp == 1 && !x.sumsCrossHosts && !(c.overlap && coresFreeForOverlap(x.m, x.l)) && c.zero == 0;
    credit_ = linkIdled && g.hostsSpanned > 1 && inter.burstBytes > 0
                  ? std::min(1.0, computeS / inter.refillS()) * inter.refillS()
                  : 0;
  }
  // A call of `seconds` whose ranks send `sentBytes` each across their hosts'
  // links, no faster than `floor` (its latency): what the bucket takes off.
  double take(double seconds, double sentBytes, double floor) {
    const LinkCost& inter = x_.m.link(LinkKind::InterHost);
    const double hostLink = sentBytes * g_.perHost * std::max(1, g_.concurrentPerHost) / inter.bytesPerS;
    const double saving = std::clamp(std::min(credit_, hostLink), 0.0, std::max(0.0, seconds - floor));
    credit_ -= saving;
    return seconds - saving;
  }

 private:
  const SyncContext& x_;
  const RankGroup& g_;
  double credit_ = 0;
};

// Each bucket its own call: auto picks each bucket's algorithm by its size.
// ZeRO reduce-scatters each bucket and allgathers the updated slices
// (parallel/zero: the collectives' own fits, not the allreduce's); stage 3's
// forward gathers every unit's parameters and backward gathers them again,
// except those still whole from the end of forward.
void bucketsSync(const SyncContext& x, const RankGroup& g, const std::vector<double>& rawBuckets, double ratio,
                 double bytes, bool periodic, BucketCredit& credit, SyncCost& out) {
  const auto& c = x.rc.train;
  const Layout& l = x.l;
  const Machine& m = x.m;
  // ZeRO 3's buckets are its units (fusionBuckets): whether backward gathers
  // each again, and the share of the bytes it gathers again.
  std::vector<bool> regathered;
  if (c.zero == 3)
    for (int i : zero3UnitLayers(l, x.p, x.gradStage)) regathered.push_back(zero3Regathers(x.p, l, i));
  double again = 0, unitsBytes = 0;
  for (size_t i = 0; i < regathered.size() && i < rawBuckets.size(); ++i) {
    unitsBytes += rawBuckets[i];
    if (regathered[i]) again += rawBuckets[i];
  }
  again /= std::max(1.0, unitsBytes);
  auto allreduce = [&](double b) {
    return credit.take(allreduceTime(m, l.placement, g, b, c.allreduceAlgo), ringAllreduceBytesPerRank(l.dp, b),
                       allreduceTime(m, l.placement, g, 4, c.allreduceAlgo));
  };
  auto perBucket = [&](double b, size_t i) {
    // PowerSGD allreduces each bucket's P, then (orthogonalized) its Q.
    if (c.compress == "powersgd") return allreduce(b / 2) + allreduce(b / 2);
    if (c.zero == 0) return allreduce(b);
    const double gathers = i < regathered.size() && regathered[i] ? 2 : 1;
    return reduceScatterTime(m, l.placement, g, b) + gathers * allgatherTime(m, l.placement, g, b);
  };
  for (size_t i = 0; i < rawBuckets.size(); ++i) out.seconds += perBucket(rawBuckets[i] * ratio, i);
  out.bytesPerRank += ringAllreduceBytesPerRank(l.dp, bytes) + again * reduceScatterBytesPerRank(l.dp, bytes);
  // The trainer sends a bucket as soon as the last micro-batch's backward
  // fills it (with --overlap, a mesh's replicas too; ZeRO's reduce-scatters
  // always): during that backward, at most what the hosts' links carry in
  // its time. Of a ring's hops, one a host crosses to the next; every
  // pipeline stage's and tensor slice's replicas sum their own.
  if (g.hostsSpanned > 1 && !periodic && (c.zero > 0 || c.overlap)) {
    const double sent = c.zero > 0 ? reduceScatterBytesPerRank(l.dp, bytes) : ringAllreduceBytesPerRank(l.dp, bytes);
    out.busyBytes += std::min(sent * g.hostsSpanned * l.pp * l.tp,
                              x.lastBackward * groupLink(m, l.placement, g).bytesPerS * l.placement.hosts);
  }
}

}  // namespace

double compressionRatio(const runtime::TrainConfig& c, const AnalyticModel& p) {
  if (c.compress == "none") return 1;
  // The model's parameters as one bucket: its matrices, then the rest (biases,
  // norms) as one vector; the compressor's own payload over its fp32 bytes.
  parallel::compress::BucketLayout layout;
  int64_t matrices = 0;
  for (const auto& [rows, cols] : weightMatrices(p)) {
    layout.shapes.push_back({rows, cols});
    matrices += rows * cols;
  }
  if (p.params() > matrices) layout.shapes.push_back({p.params() - matrices});
  const int64_t numel = layout.numel();
  if (numel == 0) return 1;
  const auto bytes = parallel::compress::wireBytes(runtime::compressOptions(c), layout);
  return static_cast<double>(bytes) / (4.0 * static_cast<double>(numel));
}

std::vector<std::pair<int64_t, int64_t>> factorLayers(const AnalyticModel& p, const std::string& mode, int64_t rows,
                                                      int dp) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (mode == "off") return out;
  for (const AnalyticLayer& layer : p.layers)
    for (const auto& [in, outputs] : layer.linears)
      if (mode == "on" || parallel::sfbPays(rows, in, outputs, dp)) out.emplace_back(in, outputs);
  return out;
}

SyncCost allreduceSync(const SyncContext& x, SyncCost out, const AllreduceSyncOptions& o) {
  const auto& c = x.rc.train;
  const Layout& l = x.l;
  const Machine& m = x.m;
  if (l.dp < 2) return out;
  const RankGroup g = meshGroup(l, MeshDim::Replicas);
  const SufficientFactorCost sfb = o.sufficientFactors ? sufficientFactors(x, g) : SufficientFactorCost{};
  const double ratio = compressionRatio(c, x.p);
  const double gradBytes = 4 * x.gradParams;
  // Fusion buckets (--fusion-mb) are cut from the fp32 gradients as the
  // trainer cuts them, whole tensors each; a compressor then shrinks each one
  // by `ratio`. Weights --sfb sends as factors leave their share.
  const double raw = gradBytes - 4 * sfb.weightParams, bytes = raw * ratio;
  std::vector<double> rawBuckets = fusionBuckets(c, l, x.p, x.gradStage, x.gradParams);
  if (rawBuckets.empty()) rawBuckets = {raw};
  for (double& b : rawBuckets) b *= gradBytes > 0 ? raw / gradBytes : 0;
  BucketCredit credit(x, g, out.computeS);
  if (parallel::compress::compressorGathers(c.compress)) {
    out.seconds = allgatherTime(m, l.placement, g, bytes * l.dp);
    out.seconds = credit.take(out.seconds, reduceScatterBytesPerRank(l.dp, bytes * l.dp),
                              allgatherTime(m, l.placement, g, 4));
    out.bytesPerRank += bytes * (l.dp - 1);
  } else {
    bucketsSync(x, g, rawBuckets, ratio, bytes, o.periodic, credit, out);
  }
  out.seconds += sfb.seconds;
  if (c.compress == "powersgd") out.seconds += powerSgdEncodeSeconds(c, m, x.p, x.computeShare);
  out.bytesPerRank += sfb.bytesPerRank;
  out.computeS += sfb.rebuildS;
  if (o.periodic)
    out.seconds /= static_cast<double>(std::max<int64_t>(1, c.strategyOptions.get<parallel::localsgd::LocalSgdConfig>().syncEvery));
  // Overlapped with backward (buckets as gradients are ready), all but the
  // last bucket; not where the emulated hosts' ranks keep every shared core
  // computing: the transfers then wait for cores (TCP and MPI's progress run
  // on them), so they come after backward instead of beside it. Compressed
  // buckets overlap as well: the trainer compresses and reduces each bucket on
  // its communication thread as backward goes.
  const bool overlaps = o.overlapsBackward && c.overlap && c.zero == 0 && coresFreeForOverlap(m, l);
  const double bucket = allreduceTime(m, l.placement, g, rawBuckets.back() * ratio, c.allreduceAlgo);
  out.exposedS = overlaps ? std::max(bucket, out.seconds - x.lastBackward) : out.seconds;
  return out;
}

}  // namespace dtrain::plan
