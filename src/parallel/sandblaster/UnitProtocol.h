#pragma once
// What Sandblaster's coordinator and workers say to each other about work
// units: the coordinator sends a unit's header (int64s: what to compute, the
// samples' dtype and shape, or where the worker reads them itself), then the
// parameters when they changed, then the samples unless the worker reads
// them; the worker answers with an AnswerHead (evaluation, unit, loss as
// doubles) and its gradient. Both sides check what the other sent before a
// number becomes an index, a shape or a size (tests/fuzz/targets/FuzzSandblaster.cpp).
#include <cstdint>
#include <vector>

#include "parallel/sandblaster/ShardProtocol.h"
#include "tensor/Tensor.h"

namespace dtrain::parallel::sandblaster::unit {

// Tags of the coordinator's and workers' messages (user channel).
constexpr int kUnitTag = 811, kParamsTag = 812, kXTag = 813, kYTag = 814;
constexpr int kAnswerHeadTag = 815, kAnswerGradTag = 816;
constexpr int kMaxDims = 6;
// A unit's samples may take at most this many bytes (x and y each).
constexpr int64_t kMaxSampleBytes = int64_t{1} << 36;
// A unit's header: kind, evaluation, unit, parameters follow, then x's and y's
// dtype, dims and shape; then who has the samples, and where a worker that
// reads them finds them: samples [lo, hi) of the batch of global step `step`
// (epoch `epoch`), which has `batch` samples.
enum HeaderField { kKind, kEvaluation, kUnit, kParamsFollow, kXMeta, kYMeta = kXMeta + 2 + kMaxDims,
                   kSamples = kYMeta + 2 + kMaxDims, kBatchEpoch, kBatchStep, kBatchSamples,
                   kUnitLo, kUnitHi, kHeaderSize };
enum Kind : int64_t { kCompute = 0, kDone = 1 };
// kParamsFollow: the parameters come from the coordinator, or from the shards.
enum ParamsFollow : int64_t { kNoParams = 0, kFromCoordinator = 1, kFromShards = 2 };
// kSamples: the samples follow the header, or the worker reads them (--sandblaster-data).
enum Samples : int64_t { kSamplesFollow = 0, kWorkerReads = 1 };

struct AnswerHead {
  double evaluation, unit, loss;
};

inline void putShape(int64_t* h, const Tensor& t) {
  DTRAIN_CHECK(t.dim() <= kMaxDims, "sandblaster: samples of ", t.dim(), " dimensions");
  h[0] = static_cast<int64_t>(t.dtype());
  h[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) h[2 + d] = t.shape()[d];
}

struct SampleMeta {
  DType dtype = DType::F32;
  Shape shape;
};

// A unit header as the worker reads it (kHeaderSize int64s).
struct UnitHeader {
  Kind kind = kDone;
  int64_t evaluation = 0, unit = 0;
  ParamsFollow params = kNoParams;
  SampleMeta x, y;      // kSamplesFollow
  bool workerReads = false;
  int64_t epoch = 0, step = 0, batch = 0, lo = 0, hi = 0;  // kWorkerReads
};

inline void malformedUnit(bool ok, const char* what, int64_t v) {
  if (!ok)
    throw ::dtrain::Error(::dtrain::detail::concat("sandblaster: malformed unit header from the coordinator: ",
                                                   what, " ", v));
}
inline SampleMeta sampleMeta(const int64_t* h, const char* which) {
  SampleMeta m;
  malformedUnit(h[0] >= 0 && h[0] <= static_cast<int64_t>(DType::U8), which, h[0]);
  m.dtype = static_cast<DType>(h[0]);
  malformedUnit(h[1] >= 0 && h[1] <= kMaxDims, "dimensions", h[1]);
  int64_t bytes = static_cast<int64_t>(dtypeSize(m.dtype));
  for (int64_t d = 0; d < h[1]; ++d) {
    const int64_t e = h[2 + d];
    malformedUnit(e >= 0 && (e == 0 || bytes <= kMaxSampleBytes / e), "extent", e);
    bytes *= e;
    m.shape.push_back(e);
  }
  return m;
}

inline UnitHeader decodeUnitHeader(const int64_t* h, int servers) {
  UnitHeader u;
  malformedUnit(h[kKind] == kCompute || h[kKind] == kDone, "kind", h[kKind]);
  u.kind = static_cast<Kind>(h[kKind]);
  if (u.kind == kDone) return u;
  malformedUnit(h[kEvaluation] >= 0 && h[kEvaluation] <= shard::kMaxCount, "evaluation", h[kEvaluation]);
  malformedUnit(h[kUnit] >= 0 && h[kUnit] < shard::kMaxUnits, "unit", h[kUnit]);
  const int64_t follow = h[kParamsFollow];
  malformedUnit(follow == kNoParams || follow == (servers > 0 ? kFromShards : kFromCoordinator),
                        "parameters-follow", follow);
  u.evaluation = h[kEvaluation];
  u.unit = h[kUnit];
  u.params = static_cast<ParamsFollow>(follow);
  malformedUnit(h[kSamples] == kSamplesFollow || h[kSamples] == kWorkerReads, "samples", h[kSamples]);
  u.workerReads = h[kSamples] == kWorkerReads;
  if (!u.workerReads) {
    u.x = sampleMeta(h + kXMeta, "x dtype");
    u.y = sampleMeta(h + kYMeta, "y dtype");
    return u;
  }
  malformedUnit(h[kBatchEpoch] >= 0 && h[kBatchEpoch] <= shard::kMaxCount, "epoch", h[kBatchEpoch]);
  malformedUnit(h[kBatchStep] >= 0 && h[kBatchStep] <= shard::kMaxCount, "step", h[kBatchStep]);
  malformedUnit(h[kBatchSamples] > 0 && h[kBatchSamples] <= shard::kMaxCount, "batch size",
                h[kBatchSamples]);
  malformedUnit(h[kUnitLo] >= 0 && h[kUnitLo] < h[kBatchSamples], "first sample", h[kUnitLo]);
  malformedUnit(h[kUnitHi] > h[kUnitLo] && h[kUnitHi] <= h[kBatchSamples], "end sample", h[kUnitHi]);
  u.epoch = h[kBatchEpoch];
  u.step = h[kBatchStep];
  u.batch = h[kBatchSamples];
  u.lo = h[kUnitLo];
  u.hi = h[kUnitHi];
  return u;
}

// A worker's answer head as the coordinator reads it.
struct Answer {
  int64_t evaluation = 0, unit = 0;
  double loss = 0;
};
inline Answer decodeAnswer(const AnswerHead& a, int worker) {
  const std::string who = ::dtrain::detail::concat("worker ", worker, "'s answer: ");
  return {shard::wholeNumber(a.evaluation, 0, shard::kMaxCount, who + "evaluation"),
          shard::wholeNumber(a.unit, 0, shard::kMaxUnits - 1, who + "unit"), a.loss};
}

}  // namespace dtrain::parallel::sandblaster::unit
