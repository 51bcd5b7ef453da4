#include "data/ShardSet.h"

#include <algorithm>

namespace dtrain::data {

std::shared_ptr<const ShardSet> ShardSet::scan(const std::vector<std::string>& files,
                                               bool skipBad, const DatasetSpec& expected) {
  auto set = std::make_shared<ShardSet>();
  set->skipBad_ = skipBad;
  set->spec_ = expected;
  const bool fixedClasses = expected.numClasses > 0;
  int32_t maxLabel = -1;
  for (const std::string& path : files) {
    ShardFile f{path};
    ShardReader reader(path, /*headersOnly=*/true);
    RawSample raw;
    for (;;) {
      try {
        if (!reader.next(raw)) break;
        const Sample s = reader.decode(raw, /*checkOnly=*/true);
        if (set->spec_.sampleShape.empty()) set->spec_.sampleShape = s.shape;
        set->check(s, path);
        maxLabel = std::max(maxLabel, s.label);
        ++f.samples;
      } catch (const BadData&) {
        if (!skipBad) throw;
        ++f.badSamples;
      }
    }
    set->samples_ += f.samples;
    set->badSamples_ += f.badSamples;
    set->files_.push_back(std::move(f));
  }
  DTRAIN_CHECK_USAGE(set->samples_ > 0, "shards ", files.front(),
                     files.size() > 1 ? " ..." : "", ": no samples");
  if (!fixedClasses) set->spec_.numClasses = maxLabel + 1;
  return set;
}

void ShardSet::check(const Sample& s, const std::string& file) const {
  const std::string member = s.key.substr(s.key.rfind(':') + 1);
  if (s.shape != spec_.sampleShape)
    throw BadData(file, member,
                  detail::concat("samples of shape ", shapeStr(s.shape), ", the set's are ",
                                 shapeStr(spec_.sampleShape)));
  if (spec_.numClasses > 0 && s.label >= spec_.numClasses)
    throw BadData(file, member,
                  detail::concat("the label ", s.label, " is not one of the training set's ",
                                 spec_.numClasses, " classes"));
}

int64_t ShardSet::minSamplesPerRank(int worldSize) const {
  const auto shards = static_cast<int64_t>(files_.size());
  DTRAIN_CHECK_USAGE(shards >= worldSize, shards, " shard", shards == 1 ? "" : "s", " for ",
                     worldSize, " ranks: every rank reads whole shards, so there must be at least "
                     "one per rank (pack smaller shards: dtrain data pack --shard-size)");
  std::vector<int64_t> counts;
  for (const ShardFile& f : files_) counts.push_back(f.samples);
  std::sort(counts.begin(), counts.end());
  int64_t sum = 0;
  for (int64_t i = 0; i < shards / worldSize; ++i) sum += counts[static_cast<size_t>(i)];
  return sum;
}

}  // namespace dtrain::data
