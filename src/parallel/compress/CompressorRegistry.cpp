// The compressor registry: name -> constructor, payload and a one-line
// description. A new compressor is a file with its make and wire-bytes
// functions plus one row here.
#include <cmath>

#include "core/Error.h"
#include "core/NameRegistry.h"
#include "parallel/compress/Factories.h"
#include "parallel/compress/TwoStage.h"

namespace dtrain::parallel::compress {
namespace {

struct Entry {
  CompressorFactory make;
  WireBytesOf wire;
  std::string description;
  bool pointToPoint;  // the compressor is a MessageCodec too (parameter-server pushes)
  bool gathers;       // aggregates by allgather: --compress-collective two-stage applies
};

const NameRegistry<Entry>& registry() {
  static const NameRegistry<Entry> entries(
      "--compress",
      {
          {"none", {makeNone, noneWireBytes, "fp32 allreduce (no compression)", false, false}},
          {"fp16", {makeFp16, halfWireBytes, "IEEE half, summed in fp32 per hop", true, false}},
          {"bf16", {makeBf16, halfWireBytes, "bfloat16, summed in fp32 per hop", true, false}},
          {"onebit", {makeOneBit, oneBitWireBytes, "1-bit SGD, per-chunk means, error feedback", true, true}},
          {"signsgd", {makeSignSgd, signSgdWireBytes, "scaled sign, error feedback", true, true}},
          {"qsgd", {makeQsgd, qsgdWireBytes, "stochastic levels, --compress-bits, unbiased", true, true}},
          {"topk", {makeTopK, topKWireBytes, "largest --compress-ratio of values, error feedback", true, true}},
          {"randomk", {makeRandomK, randomKWireBytes, "random --compress-ratio of values, error feedback", false, false}},
          {"powersgd", {makePowerSgd, powerSgdWireBytes, "rank --compress-rank P/Q factors, error feedback", false, false}},
      });
  return entries;
}

const Entry* find(const std::string& name) { return registry().tryFind(name); }

}  // namespace

int64_t BucketLayout::numel() const {
  int64_t n = 0;
  for (const auto& s : shapes) n += shapeNumel(s);
  return n;
}

std::vector<std::string> compressorNames() { return registry().names(); }

std::string describeCompressors() { return registry().describe(); }

bool compressorGathers(const std::string& name) {
  const Entry* e = find(name);
  return e && e->gathers;
}

int64_t wireBytes(const CompressOptions& options, const BucketLayout& layout) {
  return registry().find(options.name).wire(options, layout);
}

void validate(const CompressOptions& o) {
  registry().find(o.name);  // an unknown name: UsageError listing the known ones
  DTRAIN_CHECK_USAGE(o.bits >= 1 && o.bits <= 15,
                     "--compress-bits must be between 1 and 15 (got ", o.bits, ")");
  DTRAIN_CHECK_USAGE(std::isfinite(o.ratio) && o.ratio > 0 && o.ratio <= 1,
                     "--compress-ratio must be in (0, 1] (got ", o.ratio, ")");
  DTRAIN_CHECK_USAGE(o.rank >= 1, "--compress-rank must be >= 1 (got ", o.rank, ")");
  DTRAIN_CHECK_USAGE(o.startStep >= 0, "--compress-start-step must be >= 0 (got ", o.startStep, ")");
  DTRAIN_CHECK_USAGE(o.collective == "allgather" || o.collective == "two-stage",
                     "unknown --compress-collective '", o.collective,
                     "' (known: allgather, two-stage)");
  if (o.collective == "two-stage" && !find(o.name)->gathers) {
    std::string known;
    for (const auto& [name, e] : registry().entries())
      if (e.gathers) known += detail::concat(known.empty() ? "" : ", ", name);
    throw UsageError(detail::concat("--compress-collective two-stage applies to the compressors "
                                    "aggregated by allgather (", known, "), not to --compress ",
                                    o.name));
  }
}

std::unique_ptr<Compressor> makeCompressor(const CompressOptions& options,
                                           const BucketLayout& layout) {
  validate(options);
  if (options.collective == "two-stage")
    return std::make_unique<TwoStageCompressor>(options, layout);
  return find(options.name)->make(options, layout);
}

void requireMessageCodec(const std::string& name) {
  const Entry* e = find(name);
  if (e && e->pointToPoint) return;
  std::string known;
  for (const auto& [n, c] : registry().entries())
    if (c.pointToPoint) known += detail::concat(known.empty() ? "" : ", ", n);
  throw UsageError(detail::concat("--compress ", name,
                                  " does not apply to parameter-server pushes (known there: ",
                                  known, ")"));
}

std::unique_ptr<MessageCodec> makeMessageCodec(const CompressOptions& options,
                                               const BucketLayout& layout) {
  validate(options);
  requireMessageCodec(options.name);
  std::unique_ptr<Compressor> c = find(options.name)->make(options, layout);
  auto* codec = dynamic_cast<MessageCodec*>(c.get());
  DTRAIN_CHECK(codec, "compressor ", options.name, " is registered as point-to-point but is not");
  c.release();
  return std::unique_ptr<MessageCodec>(codec);
}

}  // namespace dtrain::parallel::compress
